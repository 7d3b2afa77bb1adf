"""What covey's distributed fan-out costs, as ratios measured in one run.

Run from the repo root: ``python bench/fanout.py [--repeats N] [--write]``.

The same tree (``W`` children per agent, ``D`` levels) runs three ways:

- covey: ``[sim:spawn width=W depth=D]`` submitted with ``covey.client.Client`` to
  a real ``covey worker`` subprocess (sim model, zero latency);
- raw Celery: the same canvas (``self.replace(chord(group(...), join.s()))``) on a
  plain Celery worker of ``bench/raw_tree.py``, with covey's Celery configuration
  and no covey code, so covey/raw is covey's own overhead (ledger, checkpoints,
  tree records, SDK and sim calls) on top of Celery's;
- asyncio: one process, each agent making the same sim calls through the real
  ``openai`` SDK and gathering its children, so covey/asyncio is what going
  distributed costs against doing it all in one process.

Absolute seconds depend on the machine; the ratios, taken from the same
interleaved rounds, are what to compare across runs. A private redis-server and
both workers are started here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/fanout.py` puts bench/, not the root, on the path

import httpx2  # noqa: E402
import openai  # noqa: E402
from celery import Celery  # noqa: E402

from bench import raw_tree  # noqa: E402
from bench.harness import RedisServer, Worker, start_redis  # noqa: E402
from covey.client import Client  # noqa: E402
from covey.config.settings import Settings  # noqa: E402
from covey.orchestration.tool_schemas import TOOL_SCHEMAS  # noqa: E402
from covey.models import sim  # noqa: E402
from covey.models.llm import SIM_BASE_URL  # noqa: E402

SHAPES = [(3, 2), (4, 3)]
CONCURRENCIES = [1, 4]
JOB_TIMEOUT = 120.0
COMMAND = "python bench/fanout.py --write"


def agents(width: int, depth: int) -> int:
    """Every agent of the tree, root included."""
    return sum(width**level for level in range(depth + 1))


def sim_calls(width: int, depth: int) -> int:
    """Model calls of the tree: two per spawning agent (spawn, then finish), one per leaf."""
    return 2 * agents(width, depth - 1) + width**depth


# --- the three ways to run a tree; each returns seconds and checks the answer ---


def run_covey(client: Client, width: int, depth: int) -> float:
    # Caps far above the tree's needs, so the ledger does its real accounting and refuses nothing.
    budget = {"max_tokens": 10_000_000, "max_cycles": 10_000, "max_agents": 10_000, "max_depth": depth}
    spec = client.spec(f"[sim:spawn width={width} depth={depth}] bench", budget=budget)
    start = time.perf_counter()
    result = client.submit(spec).result(timeout=JOB_TIMEOUT)
    elapsed = time.perf_counter() - start
    usage = (result.usage.agents, result.usage.cycles)
    if result.output != f"leaves={width**depth}" or usage != (agents(width, depth) - 1, sim_calls(width, depth)):
        raise RuntimeError(f"covey answered {result.status.value} {result.output!r} {result.error or ''} {usage}")
    return elapsed


def run_raw(app: Celery, width: int, depth: int) -> float:
    start = time.perf_counter()
    leaves = app.send_task(raw_tree.NODE, args=[width, depth]).get(timeout=JOB_TIMEOUT)
    elapsed = time.perf_counter() - start
    if leaves != width**depth:
        raise RuntimeError(f"raw Celery counted {leaves} leaves")
    return elapsed


async def _agent(llm: openai.AsyncOpenAI, task: str) -> tuple[str, int]:
    """One agent: call the sim, spawn what it asks for, hand it the summaries, finish.

    Returns its answer and the model calls of its subtree.
    """
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": task}]
    tools = list(TOOL_SCHEMAS.values())  # what a covey agent is offered by default
    calls = 0
    while True:
        reply = await llm.chat.completions.create(model="sim", messages=messages, tools=tools,
                                                  max_completion_tokens=1024)
        calls += 1
        call = reply.choices[0].message.tool_calls[0].model_dump()
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        args = json.loads(call["function"]["arguments"])
        if call["function"]["name"] == "finish":
            return args["answer"], calls
        children = await asyncio.gather(*(_agent(llm, child["task"]) for child in args["agents"]))
        calls += sum(n for _, n in children)
        summaries = [{"agent_id": str(i), "role": "worker", "status": "completed", "output": answer}
                     for i, (answer, _) in enumerate(children)]
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(summaries)})


async def _asyncio_tree(width: int, depth: int) -> float:
    http = httpx2.AsyncClient(transport=sim.transport())
    async with openai.AsyncOpenAI(api_key="sim", base_url=SIM_BASE_URL, http_client=http) as llm:
        start = time.perf_counter()
        answer, calls = await _agent(llm, f"[sim:spawn width={width} depth={depth}] bench")
        elapsed = time.perf_counter() - start
    if (answer, calls) != (f"leaves={width**depth}", sim_calls(width, depth)):
        raise RuntimeError(f"asyncio answered {answer!r} in {calls} calls")
    return elapsed


def run_asyncio(width: int, depth: int) -> float:
    return asyncio.run(_asyncio_tree(width, depth))


def start_workers(stack: ExitStack, redis_url: str, concurrency: int, logs: Path) -> tuple[Client, Celery]:
    """A covey worker and a raw Celery worker, each on its own queue, both ready."""
    opts = ["--concurrency", str(concurrency), "--pool", "threads", "--loglevel", "warning"]
    covey_q, raw_q = f"bench-covey-{concurrency}", f"bench-raw-{concurrency}"
    covey = Worker(f"covey{concurrency}@bench", [sys.executable, "-m", "covey", "worker", *opts,
                   "--hostname", f"covey{concurrency}@bench"], redis_url, covey_q, logs)
    stack.callback(covey.stop)
    raw = Worker(f"raw{concurrency}@bench", [sys.executable, "-m", "celery", "-A", "bench.raw_tree", "worker",
                 *opts, "--queues", raw_q, "--events", "--hostname", f"raw{concurrency}@bench"],
                 redis_url, raw_q, logs)
    stack.callback(raw.stop)
    client = Client(Settings(redis_url=redis_url, queue=covey_q))
    stack.callback(client.close)
    raw_app = raw_tree.create_app(Settings(redis_url=redis_url, queue=raw_q))
    covey.wait_ready(client.app)
    raw.wait_ready(raw_app)
    return client, raw_app


# --- measuring and reporting ---


def measure(client: Client, raw_app: Celery, width: int, depth: int, repeats: int) -> dict[str, float]:
    """Medians over ``repeats`` interleaved rounds after one warm-up, so drift hits all three alike."""
    runs = {"covey": lambda: run_covey(client, width, depth),
            "raw": lambda: run_raw(raw_app, width, depth),
            "asyncio": lambda: run_asyncio(width, depth)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats + 1):
        for name, run in runs.items():
            elapsed = run()
            if round_:
                times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()}


def table(rows: list[tuple[int, int, int, dict[str, float]]]) -> str:
    lines = ["| tree (W×D) | agents | sim calls | worker slots | covey s | covey agents/s | raw Celery s | raw agents/s "
             "| asyncio s | asyncio agents/s | covey / raw Celery | covey / asyncio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for width, depth, concurrency, m in rows:
        n = agents(width, depth)
        lines.append(
            f"| {width}×{depth} | {n} | {sim_calls(width, depth)} | {concurrency} | {m['covey']:.3f} | {n / m['covey']:.0f} "
            f"| {m['raw']:.3f} | {n / m['raw']:.0f} | {m['asyncio']:.4f} | {n / m['asyncio']:.0f} "
            f"| {m['covey'] / m['raw']:.1f}× | {m['covey'] / m['asyncio']:.1f}× |"
        )
    return "\n".join(lines)


def report(body: str, repeats: int) -> str:
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return f"""# Benchmarks

## Fan-out (`bench/fanout.py`)

It times one tree of agents (W children per agent, D levels below the root, every
agent on the zero-latency `sim` model) three ways: a covey job on a real `covey
worker` subprocess (`--pool threads`, the given slots), the same
`chord(group(...), join)` canvas as plain Celery tasks on a worker of
`bench/raw_tree.py` with covey's Celery configuration but no covey code, and one
asyncio process making the same `openai` SDK calls to the in-process sim. With a
zero-latency model this is pure overhead: covey / raw Celery is what covey's own
per-agent work (ledger reservations and settlements, checkpoints, tree records,
SDK and sim calls) adds to Celery's, and covey / asyncio is what running the tree
distributed costs against one process. Seconds depend on the machine
({os.cpu_count()} cores, Python {platform.python_version()}, and whatever else it
was running), so compare the ratios, which come from the same interleaved rounds:
medians of {repeats} after one warm-up. A real model call takes a second or more,
against which these per-agent costs are small; they are the floor covey adds.

Command (from the repo root; it starts its own redis-server and workers):

```
{COMMAND}
```

Run on {today}:

{body}
"""


def run_all(repeats: int, logs: Path) -> list[tuple[int, int, int, dict[str, float]]]:
    """Every shape on every concurrency; whatever it starts is stopped before it returns or raises."""
    rows = []
    with ExitStack() as stack:
        server = RedisServer()
        stack.callback(server.stop)
        start_redis(server)
        for concurrency in CONCURRENCIES:
            with ExitStack() as workers:
                client, raw_app = start_workers(workers, server.url, concurrency, logs)
                for width, depth in SHAPES:
                    rows.append((width, depth, concurrency, measure(client, raw_app, width, depth, repeats)))
                    print(f"measured {width}×{depth} on {concurrency} slot(s)", file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement, after one warm-up")
    parser.add_argument("--write", action="store_true", help="replace BENCHMARKS.md with the results")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` cleans up like Ctrl-C

    logs = Path(tempfile.mkdtemp(prefix="covey-bench-"))
    try:
        rows = run_all(args.repeats, logs)
    except Exception:
        print(f"worker logs kept in {logs}", file=sys.stderr)
        raise
    except BaseException:  # Ctrl-C or kill: nothing to look into
        shutil.rmtree(logs)
        raise
    shutil.rmtree(logs)
    body = table(sorted(rows))
    print(body)
    if args.write:
        (ROOT / "BENCHMARKS.md").write_text(report(body, args.repeats))
        print("wrote BENCHMARKS.md", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        # Every process started is stopped by now. Skip the interpreter's finalizers:
        # an interrupted AsyncResult would spend ~20 s retrying the stopped Redis.
        print("interrupted", file=sys.stderr)
        sys.stdout.flush()
        os._exit(130)
