"""Two tenants submitting at once: how long the small one waits behind the big one.

Run from the repo root:
``python bench/fairness.py [--big N] [--small N] [--latency-ms MS] [--json PATH]``.

The big tenant submits its jobs first, then the small tenant its own, to one
``covey worker --pool threads --concurrency 20`` process; every model call takes
``--latency-ms`` (200 ms by default: ``COVEY_SIM_LATENCY_MS``). Two rounds: the
big tenant uncapped (the broker's queue is first in, first out, so the small
tenant's jobs wait behind all of the big one's), then the big tenant capped at
half the slots (``covey scope tenant:big --max-running 10``: its other agents
give their slots back). Each round reports when each tenant's last job finished,
counted from that tenant's first submit (the small tenant starts submitting once
the big one is done submitting, as a second client would arrive while the first
one's jobs are queued); the ratio is the small tenant's wait uncapped over
capped, from the same run. A private redis-server and the worker are started
here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/fairness.py` puts bench/, not the root, on the path

from bench.harness import interruptible, report, sim_worker
from covey import keys
from covey.budgets.running import RunningSlots
from covey.client import Client
from covey.context import ROOT_AGENT_ID

SLOTS = 20
LATENCY_MS = 200
POLL_SECONDS = 0.1


def _finished(client: Client, job_ids: list[str]) -> int:
    """How many of the jobs' roots have ended, in one round trip."""
    with client.redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(keys.nodes(job_id), ROOT_AGENT_ID)
        nodes = pipe.execute()
    return sum(node is not None and json.loads(node)["s"] not in ("queued", "running", "waiting") for node in nodes)


def _round(client: Client, big: int, small: int, cap: int | None) -> dict:
    """Submit both tenants' jobs and time when each tenant's last one ended."""
    run = time.time_ns()
    names = {"big": f"big{run}", "small": f"small{run}"}
    for name in names.values():
        client.ledger.set_scope(f"tenant:{name}", None, None)
    RunningSlots(client.redis).set_cap(f"tenant:{names['big']}", cap)
    spec = {"tools": [], "max_call_tokens": 64}
    jobs: dict[str, list[str]] = {}
    started: dict[str, float] = {}
    for tenant, count in (("big", big), ("small", small)):
        started[tenant] = time.monotonic()
        jobs[tenant] = [
            client.submit(client.spec(f"What is {i} + 1?", tenant=names[tenant], **spec), subscribe=False).id
            for i in range(count)
        ]
    ended: dict[str, float] = {}
    while len(ended) < 2:
        for tenant, ids in jobs.items():
            if tenant not in ended and _finished(client, ids) == len(ids):
                ended[tenant] = time.monotonic() - started[tenant]
        time.sleep(POLL_SECONDS)
    return {"cap": cap, "small_done_s": round(ended["small"], 2), "big_done_s": round(ended["big"], 2)}


def measure(logs: Path, big: int, small: int, latency_ms: int) -> dict:
    with ExitStack() as stack:
        client = sim_worker(stack, "fair@bench", logs, SLOTS, latency_ms)
        rounds = [_round(client, big, small, cap) for cap in (None, SLOTS // 2)]
    uncapped, capped = rounds
    return {
        "big": big,
        "small": small,
        "slots": SLOTS,
        "latency_ms": latency_ms,
        "python": platform.python_version(),
        "rounds": rounds,
        "small_wait_uncapped_over_capped": round(uncapped["small_done_s"] / capped["small_done_s"], 1),
    }


def _rows(f: dict, run: str) -> list[str]:
    rows = []
    for r in f["rounds"]:
        cap = "none" if r["cap"] is None else f"`--max-running {r['cap']}`"
        ratio = f"{f['small_wait_uncapped_over_capped']}×" if r["cap"] is not None else ""
        rows.append(f"| {run} | {cap} | {r['small_done_s']} s | {r['big_done_s']} s | {ratio} |")
    return rows


def section(after: dict, before: dict | None) -> str:
    runs = [("before", before), ("after", after)] if before else [("this commit", after)]
    rows = [row for run, f in runs for row in _rows(f, run)]
    capped = after["rounds"][1]
    floor = after["big"] * after["latency_ms"] / 1000 / capped["cap"]
    return f"""## Two tenants at once (`bench/fairness.py`)

A big tenant submits {after["big"]:,} one-call jobs, then a small tenant submits {after["small"]}, to one
`covey worker --pool threads --concurrency {after["slots"]}` process; every model call of the
`sim` model takes {after["latency_ms"]} ms. Each tenant's time is from its own first
submit to its last job's end. Uncapped, the broker's first-in-first-out queue
puts the small tenant behind all of the big one's jobs. Capped at half the slots
(`covey scope tenant:big --max-running {capped["cap"]}`), the big tenant holds at most {capped["cap"]}; its
other jobs are taken in turn and give their slot back in milliseconds, queued on
the scope and woken as its slots free up, so the small tenant waits for those
give-backs, not for the big tenant's calls, and grows with how many the big tenant has
queued ahead, not with how long their calls take. The big tenant keeps its {capped["cap"]} slots
busy: its calls on {capped["cap"]} slots take at least {floor:.0f} s, and it took {capped["big_done_s"]} s.
One round each, Python {after["python"]}:

```
python bench/fairness.py --big {after["big"]} --small {after["small"]} --latency-ms {after["latency_ms"]}
```

| run | big tenant's cap | small tenant all done | big tenant all done | small tenant's wait, uncapped / capped |
|---|---|---:|---:|---:|
{chr(10).join(rows)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big", type=int, default=1000, help="jobs of the big tenant")
    parser.add_argument("--small", type=int, default=10, help="jobs of the small tenant")
    parser.add_argument("--latency-ms", type=int, default=LATENCY_MS, help="each model call's latency")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    report(lambda logs: measure(logs, args.big, args.small, args.latency_ms), lambda f: section(f, None), args.json)


if __name__ == "__main__":
    interruptible(main)
