"""How much of a tenant's cap its jobs spend when they all want it at once.

Run from the repo root:
``python bench/contention.py [--jobs 60] [--runs 5] [--kill] [--json PATH]``.

A tenant capped in tokens (``--tokens``) and in dollars (``--dollars``, the sim
priced by ``COVEY_SIM_PRICE``) sends ``--jobs`` jobs at once (``react`` answering
``What is i + 1?`` with the calculator: two model calls, each reserved as its
prompt plus the default 4,096-token reply cap, each costing a few hundred tokens)
to three worker processes at their defaults (``covey worker --processes 2`` and
``--processes 1``); every model call takes ``--latency-ms``. Each run reports what
the tenant spent against each cap (the ledger's scope row), how many jobs
completed and how many were refused for the budget, and any spend past a cap.
``--kill`` SIGKILLs the one-process worker once a third of the jobs have ended
(the other takes its deliveries over).

A private redis-server is started here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/contention.py` puts bench/, not the root, on the path

from bench.harness import Worker, private_redis, report
from covey.client import Client
from covey.config.settings import Settings

PRICE = '{"input": 0.15, "output": 0.6}'  # USD per million tokens, as gpt-4o-mini's
JOB_SECONDS = 300


def one_run(url: str, logs: Path, args: argparse.Namespace, run: int) -> dict:
    """One tenant, its caps, its jobs sent at once; what it spent of each cap."""
    env = {"COVEY_SIM_PRICE": PRICE, "COVEY_SIM_LATENCY_MS": str(args.latency_ms)}
    workers = []
    for name, processes in ((f"contention-{run}a@bench", "2"), (f"contention-{run}b@bench", "1")):
        argv = [sys.executable, "-m", "covey", "worker", "--processes", processes, "--hostname", name]
        workers.append(Worker(name, argv, url, "covey", logs, env))
    client = Client(Settings(redis_url=url, model="sim"))
    tenant = f"t{uuid.uuid4().hex[:8]}"
    scope = f"tenant:{tenant}"
    try:
        for worker in workers:
            worker.wait_ready(client.app)
        client.ledger.set_scope(scope, args.tokens, None, max_cost=args.dollars)
        handles = [client.submit(client.spec(f"What is {i} + 1?", tenant=tenant)) for i in range(args.jobs)]
        killed = False
        results = []
        for n, handle in enumerate(handles):
            if args.kill and not killed and n >= args.jobs // 3:
                os.killpg(workers[1].proc.pid, signal.SIGKILL)  # it and its process, as a machine lost
                killed = True
            results.append(handle.result(timeout=JOB_SECONDS))
        row = next(r for r in client.ledger.scope_rows() if r.name == scope)
    finally:
        for worker in workers:
            worker.stop()
        client.close()
    statuses = Counter("wrapped_up" if r.wrapped_up else r.status.value for r in results)  # wrap-ups apart
    return {
        "tokens_used": row.tokens_used,
        "tokens_cap": args.tokens,
        "tokens_share": row.tokens_used / args.tokens,
        "cost_used": row.cost_used,
        "cost_cap": args.dollars,
        "cost_share": row.cost_used / args.dollars,
        "over": max(0, row.tokens_used - args.tokens) + max(0.0, row.cost_used - args.dollars),
        "reserved_left": row.tokens_reserved,
        "statuses": dict(statuses),
        "killed": killed,
    }


def show(figures: dict) -> str:
    lines = []
    for n, found in enumerate(figures["runs"], start=1):
        lines.append(
            f"run {n}: tokens {found['tokens_used']}/{found['tokens_cap']} ({found['tokens_share']:.1%}), "
            f"cost ${found['cost_used']:.6f}/${found['cost_cap']} ({found['cost_share']:.1%}), over {found['over']}, "
            f"{found['statuses']}" + (" (a worker process killed)" if found["killed"] else "")
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=20_000, help="the tenant's token cap")
    parser.add_argument(
        "--dollars", type=float, default=0.0031, help="the tenant's dollar cap (binding about where the tokens do)"
    )
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--kill", action="store_true", help="SIGKILL a worker process a third of the way in")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    def measure(logs: Path) -> dict:
        with ExitStack() as stack:
            server, _ = private_redis(stack)
            return {"runs": [one_run(server.url, logs, args, run) for run in range(args.runs)]}

    report(measure, show, args.json)


if __name__ == "__main__":
    main()
