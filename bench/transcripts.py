"""What recording transcripts costs a worker, as a ratio measured in one run.

Run from the repo root: ``python bench/transcripts.py [--rounds N] [--json PATH]``.

``bench/fanout.py``'s tree (``[sim:spawn width=4 depth=3]``: 85 agents, 106 sim
calls) runs on two ``covey worker`` subprocesses alike in all but
``COVEY_TRANSCRIPTS`` (on, the default, and off), one process of four threads
each, on queues of their own. Rounds interleave the two (their order swapped
each round), so a slow spell on a shared machine falls on both; a run is three
trees (``/proc`` counts CPU in ticks of 10 ms), its worker CPU is divided by
their agents, and the medians are compared. One more tree each is run with
Redis's counters reset, to count the scripts run per agent (a transcript rides
the writes a step makes anyway, so these must be equal) and the bytes a
transcript keeps.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/transcripts.py` puts bench/, not the root, on the path

import redis

from bench.fanout import ONE_PROCESS, agents, cpu_seconds, run_covey
from bench.harness import Worker, interruptible, private_redis, report
from covey.client import Client
from covey.config.settings import Settings

WIDTH, DEPTH = 4, 3
SLOTS = 4
TREES_PER_RUN = 3  # /proc counts CPU in 10 ms ticks: over three trees a tick is under 0.05 ms per agent
SETTLE_SECONDS = 0.5  # after a tree, for its last acks to land before the worker's CPU is read
MODES = ("on", "off")  # COVEY_TRANSCRIPTS of the two workers


def start(stack: ExitStack, redis_url: str, mode: str, logs: Path) -> tuple[Client, int]:
    name = f"transcripts-{mode}@bench"
    opts = ["--concurrency", str(SLOTS), "--pool", "threads", "--loglevel", "warning", "--hostname", name]
    worker = Worker(
        name,
        [sys.executable, "-m", "covey", "worker", *opts],
        redis_url,
        f"bench-transcripts-{mode}",
        logs,
        env={**ONE_PROCESS, "COVEY_TRANSCRIPTS": mode},
    )
    stack.callback(worker.stop)
    client = Client(Settings(redis_url=redis_url, queue=f"bench-transcripts-{mode}"))
    stack.callback(client.close)
    worker.wait_ready(client.app)
    return client, worker.proc.pid


def cpu_ms_per_agent(client: Client, pid: int) -> float:
    before = cpu_seconds(pid)
    for _ in range(TREES_PER_RUN):
        run_covey(client, WIDTH, DEPTH)
    time.sleep(SETTLE_SECONDS)
    return 1000 * (cpu_seconds(pid) - before) / (TREES_PER_RUN * agents(WIDTH, DEPTH))


def scripts_per_agent(client: Client, r: redis.Redis) -> float:
    """Scripts run per agent (EVALSHA and EVAL calls, from every client) over one tree."""
    time.sleep(SETTLE_SECONDS)
    r.config_resetstat()
    run_covey(client, WIDTH, DEPTH)
    time.sleep(SETTLE_SECONDS)
    stats = r.info("commandstats")
    scripts = sum(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "eval"))
    return scripts / agents(WIDTH, DEPTH)


def transcript_bytes(r: redis.Redis) -> tuple[int, int]:
    """What every transcript holds (its entries' bytes) and what Redis spends on them (``MEMORY USAGE``)."""
    found = list(r.scan_iter("covey:*:transcript:*", count=1000))
    held = sum(int(r.hget(key, "bytes") or 0) for key in found)
    return held, sum(r.memory_usage(key, samples=0) or 0 for key in found)


def run_all(rounds: int, logs: Path) -> dict:
    n = agents(WIDTH, DEPTH)
    with ExitStack() as stack:
        server, r = private_redis(stack)
        workers = {mode: start(stack, server.url, mode, logs) for mode in MODES}
        for client, _ in workers.values():
            run_covey(client, WIDTH, DEPTH)  # warm-up
        cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
        for round_ in range(rounds):
            order = MODES if round_ % 2 == 0 else MODES[::-1]
            for mode in order:
                client, pid = workers[mode]
                cpu[mode].append(cpu_ms_per_agent(client, pid))
            print(f"round {round_ + 1}/{rounds}", file=sys.stderr)
        scripts = {}
        for mode, (client, _) in workers.items():
            before = transcript_bytes(r)
            scripts[mode] = scripts_per_agent(client, r)
            if mode == "on":
                after = transcript_bytes(r)
                kept, memory = ((a - b) / n for a, b in zip(after, before))
    return {
        "tree": [WIDTH, DEPTH],
        "agents": n,
        "rounds": rounds,
        "cpu_ms_per_agent": {mode: statistics.median(values) for mode, values in cpu.items()},
        "cpu_runs": cpu,
        "scripts_per_agent": scripts,
        "transcript_bytes_per_agent": kept,
        "transcript_memory_per_agent": memory,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }


def table(f: dict) -> str:
    on, off = f["cpu_ms_per_agent"]["on"], f["cpu_ms_per_agent"]["off"]
    return "\n".join(
        [
            f"| per agent ({f['tree'][0]}×{f['tree'][1]} tree, {f['agents']} agents) "
            "| transcripts on | off | on / off |",
            "|---|---:|---:|---:|",
            f"| worker CPU ms (median of {f['rounds']} interleaved rounds) | {on:.2f} | {off:.2f} | {on / off:.3f}× |",
            f"| the same, median of each round's on / off | | | {paired(f):.3f}× |",
            f"| Redis scripts run (round trips to Lua) | {f['scripts_per_agent']['on']:.2f} "
            f"| {f['scripts_per_agent']['off']:.2f} | "
            f"{f['scripts_per_agent']['on'] / f['scripts_per_agent']['off']:.2f}× |",
            f"| transcript bytes kept (entries) | {f['transcript_bytes_per_agent']:.0f} | 0 | |",
            f"| Redis memory of the transcripts (`MEMORY USAGE`) | {f['transcript_memory_per_agent']:.0f} | 0 | |",
        ]
    )


def paired(f: dict) -> float:
    """The median of each round's on / off: the two runs of a round share the machine's mood."""
    return statistics.median(a / b for a, b in zip(f["cpu_runs"]["on"], f["cpu_runs"]["off"]))


def section(after: dict, before: dict | None = None) -> str:
    on, off = after["cpu_ms_per_agent"]["on"], after["cpu_ms_per_agent"]["off"]
    return f"""## Transcripts (`bench/transcripts.py`)

`bench/fanout.py`'s {after["tree"][0]}×{after["tree"][1]} tree on two `covey worker`s alike but for
`COVEY_TRANSCRIPTS` (on, the default, and off), each one process of {SLOTS} threads;
{after["rounds"]} rounds interleave the two (their order swapped each round), each run {TREES_PER_RUN} trees,
and each run's worker CPU per agent is taken from `/proc`; medians are compared ({after["cores"]} cores, Python
{after["python"]}, a machine shared with other work). Recording adds
{100 * (on - off) / off:.1f}% worker CPU per agent by the medians, {100 * (paired(after) - 1):.1f}% by the
median of each round's ratio (goal: under 10%), and no round trip: the
scripts run per agent are the same. A finished agent's transcript stays in Redis as long as its
job's records (`COVEY_JOB_TTL`): the memory below comes on top of what `bench/memory.py` counts.

Command (from the repo root; it starts its own redis-server and workers):

```
python bench/transcripts.py --rounds {after["rounds"]}
```

{table(after)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds of one tree per worker")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(lambda logs: run_all(args.rounds, logs), lambda figures: section(figures), args.json)


if __name__ == "__main__":
    interruptible(main)
