"""What an agent costs Redis: commands and round trips per agent, in a tree and in single jobs.

Run from the repo root: ``python bench/commands.py [--jobs N] [--width W] [--json PATH]``.

A private redis-server and one ``covey worker`` (one process, 4 thread slots) run
N one-call jobs (``single`` on the ``sim`` model, as a sweep's samples are) and
then a ``[sim:spawn width=W depth=2]`` tree; for each, Redis's own
``INFO commandstats`` counts every command it ran (those inside Lua scripts too,
the broker's as well as covey's), and the worker counts its round trips: each
time one of its Redis connections sends commands and waits for the replies (a
pipeline is one), through a hook this script puts in the worker
(``bench/roundtrips/sitecustomize.py``). Figures are per agent, over the whole
run: the client's commands (submitting, waiting on results) and the worker's
threads' (heartbeat, reconciler, catalog) are among Redis's. ``--json`` keeps
each command's count per agent too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/commands.py` puts bench/, not the root, on the path

from bench.fanout import agents
from bench.harness import ROOT as HERE
from bench.harness import Worker, private_redis, report
from covey.client import Client
from covey.config.settings import Settings

HOOK = Path(__file__).resolve().parent / "roundtrips"
QUEUE = "covey"


def measured(counts: Path, redis_client, run) -> dict:
    """Commands Redis ran and round trips the worker made (its hook writes ``counts``)
    while ``run`` ran (it returns its agents)."""
    before = int(counts.read_text() or 0) if counts.exists() else 0
    redis_client.config_resetstat()
    count = run()
    time.sleep(1.5)  # the worker's last acks and its counter's next write
    stats = redis_client.info("commandstats")
    total = sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_"))
    trips = int(counts.read_text() or 0) - before
    by_command = {k.removeprefix("cmdstat_"): round(int(v["calls"]) / count, 2) for k, v in stats.items()}
    return {
        "agents": count,
        "commands_per_agent": total / count,
        "round_trips_per_agent": trips / count,
        "by_command": dict(sorted(by_command.items(), key=lambda kv: -kv[1])),
    }


def measure(logs: Path, jobs: int, width: int) -> dict:
    with ExitStack() as stack:
        server, redis_client = private_redis(stack)
        counts = logs / "roundtrips"
        env = {"PYTHONPATH": f"{HOOK}{os.pathsep}{HERE}", "COVEY_BENCH_ROUNDTRIPS": str(counts)}
        argv = [sys.executable, "-m", "covey", "worker", "--processes", "1", "--pool", "threads"]
        argv += ["--concurrency", "4", "--hostname", "bench@commands"]
        worker = Worker("bench@commands", argv, server.url, QUEUE, logs, env)
        stack.callback(worker.stop)
        client = Client(Settings(redis_url=server.url, queue=QUEUE))
        stack.callback(client.close)
        worker.wait_ready(client.app)
        client.run("What is 1 + 1?", timeout=60)  # warm: scripts loaded, pools filled

        def singles() -> int:
            handles = [client.submit(client.spec(f"What is {i} + 1?", strategy="single")) for i in range(jobs)]
            for handle in handles:
                assert handle.result(timeout=120).ok
            return jobs

        def tree() -> int:
            result = client.run(f"[sim:spawn width={width} depth=2] go", timeout=300)
            assert result.ok, result.error
            return agents(width, 2)

        return {"single": measured(counts, redis_client, singles), "tree": measured(counts, redis_client, tree)}


def show(figures: dict) -> str:
    rows = ["| run | agents | Redis commands per agent | worker round trips per agent |", "|---|---:|---:|---:|"]
    for name, f in figures.items():
        rows.append(f"| {name} | {f['agents']} | {f['commands_per_agent']:.1f} | {f['round_trips_per_agent']:.1f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200, help="one-call jobs")
    parser.add_argument("--width", type=int, default=3, help="the tree's width (depth 2)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(lambda logs: measure(logs, args.jobs, args.width), show, args.json)


if __name__ == "__main__":
    main()
