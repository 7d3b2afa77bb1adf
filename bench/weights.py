"""Two tenants waiting for one shared running cap: are they admitted by their weights?

Run from the repo root:
``python bench/weights.py [--jobs N] [--cap N] [--latency-ms MS] [--json PATH]``.

Two tenants send ``--jobs`` one-call jobs each, interleaved, to one
``covey worker --pool threads --concurrency 16`` process, under one shared cap
(``covey scope global --max-running 4``); every model call of the ``sim`` model
takes ``--latency-ms``. Two rounds: the tenants weighted 3:1 (``covey scope
tenant:a --weight 3``), then equally (the baseline). Each round counts the jobs
of each tenant that completed in the first half of the round (from the first
submit to the last completion): while both tenants wait, they are admitted in
proportion to their weights, so the counts' ratio should be the weights' (3.0
within 10%). A private redis-server and the worker are started here and stopped
on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/weights.py` puts bench/, not the root, on the path

from bench.harness import interruptible, report, sim_worker
from covey.budgets.running import RunningSlots
from covey.client import Client

SLOTS = 16
CAP = 4
LATENCY_MS = 50
JOB_SECONDS = 900


def _round(client: Client, jobs: int, weights: tuple[int, int]) -> dict:
    """Both tenants' jobs, interleaved; each tenant's completions in the round's first half."""
    run = time.time_ns()
    names = {"a": f"a{run}", "b": f"b{run}"}
    slots = RunningSlots(client.redis)
    for tenant, weight in zip(names.values(), weights):
        slots.set_weight(f"tenant:{tenant}", weight)
    spec = {"tools": [], "max_call_tokens": 64}
    started = datetime.now(UTC)
    sent = [
        (tenant, client.submit(client.spec(f"What is {i} + 1?", tenant=names[tenant], **spec), subscribe=False))
        for i in range(jobs)
        for tenant in ("b", "a")  # the lighter first each time: the turns, not arrival, decide
    ]
    ended = [(tenant, job.result(timeout=JOB_SECONDS)) for tenant, job in sent]
    assert all(r.output == str(i // 2 + 1) for i, (_, r) in enumerate(ended)), "a job answered wrong"
    last = max(r.finished_at for _, r in ended if r.finished_at)
    half = started + (last - started) / 2
    first = {
        t: sum(tenant == t and r.finished_at is not None and r.finished_at <= half for tenant, r in ended)
        for t in names
    }
    return {
        "weights": list(weights),
        "seconds": round((last - started).total_seconds(), 1),
        "first_half": first,
        "ratio": round(first["a"] / max(first["b"], 1), 2),
    }


def measure(logs: Path, jobs: int, cap: int, latency_ms: int) -> dict:
    with ExitStack() as stack:
        client = sim_worker(stack, "weights@bench", logs, SLOTS, latency_ms)
        RunningSlots(client.redis).set_cap("global", cap)
        rounds = [_round(client, jobs, weights) for weights in ((3, 1), (1, 1))]
    return {
        "jobs": jobs,
        "cap": cap,
        "slots": SLOTS,
        "latency_ms": latency_ms,
        "python": platform.python_version(),
        "rounds": rounds,
    }


def section(after: dict, before: dict | None) -> str:
    rows = [
        f"| {r['weights'][0]}:{r['weights'][1]} | {r['first_half']['a']} | {r['first_half']['b']} | "
        f"{r['ratio']} | {r['seconds']} s |"
        for r in after["rounds"]
    ]
    return f"""## Weighted fair share (`bench/weights.py`)

Tenants `a` and `b` send {after["jobs"]} one-call jobs each, interleaved (b's first each time), to one
`covey worker --pool threads --concurrency {after["slots"]}` process under a shared cap
(`covey scope global --max-running {after["cap"]}`); every model call of the `sim` model takes
{after["latency_ms"]} ms. The waiters of a capped scope queue by turns (a weighted fair
queue: `covey/budgets/lua/turns.lua`), each slot given back is held for the next
waiter in turn, and no newcomer takes a slot out of turn, so tenants that both wait
are admitted in proportion to their weights (`covey scope tenant:a --weight 3`).
Counted: each tenant's jobs completed in the first half of the round (first submit
to last completion), while both still wait; the target for 3:1 is 3.0 within 10%
(2.7 to 3.3), and equal weights are the baseline. One round each, Python {after["python"]}:

```
python bench/weights.py --jobs {after["jobs"]} --cap {after["cap"]} --latency-ms {after["latency_ms"]}
```

| weights a:b | a's completions, first half | b's completions, first half | a / b | round |
|---|---:|---:|---:|---:|
{chr(10).join(rows)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=500, help="jobs of each tenant")
    parser.add_argument("--cap", type=int, default=CAP, help="the shared cap: global's --max-running")
    parser.add_argument("--latency-ms", type=int, default=LATENCY_MS, help="each model call's latency")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    report(lambda logs: measure(logs, args.jobs, args.cap, args.latency_ms), lambda f: section(f, None), args.json)


if __name__ == "__main__":
    interruptible(main)
