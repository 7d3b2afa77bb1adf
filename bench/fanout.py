"""What covey's distributed fan-out costs, as ratios measured in one run.

Run from the repo root: ``python bench/fanout.py [--repeats N] [--json PATH]``; ``bench/all.py``
runs it with the other benchmarks and writes BENCHMARKS.md.

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
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/fanout.py` puts bench/, not the root, on the path

import httpx2
import openai
import redis
from celery import Celery

from bench import raw_tree
from bench.harness import Worker, cpu_seconds, interruptible, private_redis, report
from covey.client import Client
from covey.config.settings import Settings
from covey.models import sim
from covey.models.llm import SIM_BASE_URL
from covey.tools.registry import names, schema

SHAPES = [(3, 2), (4, 3)]
CONCURRENCIES = [1, 4]
JOB_TIMEOUT = 120.0
COST_TREES = 3  # trees whose Redis commands and worker CPU are counted
# One covey worker process, as the raw Celery worker is one: the ratio is per-agent work, not cores.
ONE_PROCESS = {"COVEY_WORKER_PROCESSES": "1"}


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
    tools = [schema(name) for name in names()]  # what a covey agent is offered by default
    calls = 0
    while True:
        reply = await llm.chat.completions.create(
            model="sim", messages=messages, tools=tools, max_completion_tokens=1024
        )
        calls += 1
        call = reply.choices[0].message.tool_calls[0].model_dump()
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        args = json.loads(call["function"]["arguments"])
        if call["function"]["name"] == "finish":
            return args["answer"], calls
        children = await asyncio.gather(*(_agent(llm, child["task"]) for child in args["agents"]))
        calls += sum(n for _, n in children)
        summaries = [
            {"agent_id": str(i), "role": "worker", "status": "completed", "output": answer}
            for i, (answer, _) in enumerate(children)
        ]
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


def start_workers(stack: ExitStack, redis_url: str, concurrency: int, logs: Path) -> tuple[Client, Celery, dict]:
    """A covey worker and a raw Celery worker, each on its own queue, both ready."""
    opts = ["--concurrency", str(concurrency), "--pool", "threads", "--loglevel", "warning"]
    covey_q, raw_q = f"bench-covey-{concurrency}", f"bench-raw-{concurrency}"
    covey = Worker(
        f"covey{concurrency}@bench",
        [sys.executable, "-m", "covey", "worker", *opts, "--hostname", f"covey{concurrency}@bench"],
        redis_url,
        covey_q,
        logs,
        env=ONE_PROCESS,
    )
    stack.callback(covey.stop)
    raw = Worker(
        f"raw{concurrency}@bench", raw_tree.worker_argv(raw_q, f"raw{concurrency}@bench", *opts), redis_url, raw_q, logs
    )
    stack.callback(raw.stop)
    client = Client(Settings(redis_url=redis_url, queue=covey_q))
    stack.callback(client.close)
    raw_app = raw_tree.create_app(Settings(redis_url=redis_url, queue=raw_q))
    covey.wait_ready(client.app)
    raw.wait_ready(raw_app)
    return client, raw_app, {"covey": covey.proc.pid, "raw": raw.proc.pid}


# --- measuring and reporting ---


def measure(client: Client, raw_app: Celery, width: int, depth: int, repeats: int) -> dict[str, float]:
    """Medians over ``repeats`` interleaved rounds after one warm-up, so drift hits all three alike."""
    runs = {
        "covey": lambda: run_covey(client, width, depth),
        "raw": lambda: run_raw(raw_app, width, depth),
        "asyncio": lambda: run_asyncio(width, depth),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats + 1):
        for name, run in runs.items():
            elapsed = run()
            if round_:
                times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()}


def commands(r: redis.Redis) -> int:
    """Commands Redis has run since its counters were reset (those inside scripts too)."""
    return sum(stat["calls"] for stat in r.info("commandstats").values())


def costs(
    client: Client, raw_app: Celery, pids: dict[str, int], r: redis.Redis, width: int, depth: int, trees: int
) -> dict[str, dict[str, float]]:
    """Redis commands, Redis's CPU and the worker's per agent, for covey and raw
    Celery: ``trees`` trees each, after the timed rounds (the counters read only this work)."""
    runs = {"covey": lambda: run_covey(client, width, depth), "raw": lambda: run_raw(raw_app, width, depth)}
    n = agents(width, depth) * trees
    out = {}
    for name, run in runs.items():
        time.sleep(1)  # the last round's acks and events land before the counters reset
        r.config_resetstat()
        cpu, redis_cpu = cpu_seconds(pids[name]), cpu_seconds(pids["redis"])
        for _ in range(trees):
            run()
        time.sleep(1)
        out[name] = {
            "commands_per_agent": commands(r) / n,
            "cpu_ms_per_agent": 1000 * (cpu_seconds(pids[name]) - cpu) / n,
            "redis_cpu_ms_per_agent": 1000 * (cpu_seconds(pids["redis"]) - redis_cpu) / n,
        }
    return out


def table(rows: list[tuple[int, int, int, dict[str, float]]]) -> str:
    lines = [
        "| tree (W×D) | agents | sim calls | worker slots | covey s | covey agents/s | raw Celery s | raw agents/s "
        "| asyncio s | asyncio agents/s | covey / raw Celery | covey / asyncio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for width, depth, concurrency, m in rows:
        n = agents(width, depth)
        lines.append(
            f"| {width}×{depth} | {n} | {sim_calls(width, depth)} | {concurrency} "
            f"| {m['covey']:.3f} | {n / m['covey']:.0f} "
            f"| {m['raw']:.3f} | {n / m['raw']:.0f} | {m['asyncio']:.4f} | {n / m['asyncio']:.0f} "
            f"| {m['covey'] / m['raw']:.1f}× | {m['covey'] / m['asyncio']:.1f}× |"
        )
    return "\n".join(lines)


def cost_table(after: dict, before: dict | None) -> str:
    figures = [
        ("Redis commands per agent", "commands_per_agent", ".0f"),
        ("worker CPU ms per agent", "cpu_ms_per_agent", ".2f"),
        ("Redis CPU ms per agent", "redis_cpu_ms_per_agent", ".2f"),
    ]
    runs = [("before", before["costs"]), ("after", after["costs"])] if before else [("", after["costs"])]
    head = " | ".join(f"{label} covey | {label} raw Celery | {label} covey / raw".strip() for label, _ in runs)
    lines = [
        f"| per agent ({'×'.join(map(str, after['costs']['tree']))} tree) | {head} |",
        "|---|" + "---:|" * (3 * len(runs)),
    ]
    for title, key, fmt in figures:
        cells = " | ".join(
            f"{c['covey'][key]:{fmt}} | {c['raw'][key]:{fmt}} | {c['covey'][key] / c['raw'][key]:.2f}×"
            if key in c["covey"]
            else "— | — | —"  # an older bench/ measured less
            for _, c in runs
        )
        lines.append(f"| {title} | {cells} |")
    return "\n".join(lines)


def ratio_table(after: dict, before: dict) -> str:
    """covey / raw Celery before and after, shape by shape."""
    lines = ["| tree (W×D) | worker slots | covey / raw Celery before | after |", "|---|---:|---:|---:|"]
    earlier = {(w, d, c): m for w, d, c, m in before["rows"]}
    for width, depth, concurrency, m in after["rows"]:
        b = earlier.get((width, depth, concurrency))
        was = f"{b['covey'] / b['raw']:.2f}×" if b else "—"
        lines.append(f"| {width}×{depth} | {concurrency} | {was} | {m['covey'] / m['raw']:.2f}× |")
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    """The BENCHMARKS.md section: after's table, and before's beside it when given."""
    compared = (
        ""
        if before is None
        else f"""
Before and after, the same command on both trees:

{ratio_table(after, before)}
"""
    )
    return f"""## Fan-out (`bench/fanout.py`)

It times one tree of agents (W children per agent, D levels below the root, every
agent on the zero-latency `sim` model) three ways: a covey job on a real `covey
worker` subprocess (one process, `--pool threads`, the given slots), the same
`chord(group(...), join)` canvas as plain Celery tasks on a worker of
`bench/raw_tree.py` with covey's Celery configuration but no covey code, and one
asyncio process making the same `openai` SDK calls to the in-process sim. With a
zero-latency model this is pure overhead: covey / raw Celery is what covey's own
per-agent work (ledger reservations and settlements, checkpoints, tree records,
SDK and sim calls) adds to Celery's, and covey / asyncio is what running the tree
distributed costs against one process. Seconds depend on the machine
({after["cores"]} cores, Python {after["python"]}, and whatever else it was running), so
compare the ratios, which come from the same interleaved rounds: medians of
{after["repeats"]} after one warm-up. Redis commands (those inside Lua scripts
included, all clients) and the worker's CPU are counted over {COST_TREES} more trees.

{table(after["rows"])}

{cost_table(after, before)}

{sdk_floor(after)}
{compared}"""


def sdk_floor(after: dict) -> str:
    """What the model calls alone cost an agent (the asyncio run of the cost tree on one
    slot: nothing but SDK and sim calls, on one core), and so the least covey's CPU per
    agent can be beside raw Celery's, which makes no model call."""
    width, depth = after["costs"]["tree"]
    asyncio_s = next(
        m["asyncio"] for w, d, c, m in after["rows"] if (w, d) == (width, depth) and c == min(CONCURRENCIES)
    )
    sdk_ms = 1000 * asyncio_s / agents(width, depth)
    raw_ms = after["costs"]["raw"]["cpu_ms_per_agent"]
    return (
        f"An agent's model calls alone (the asyncio run of the {width}×{depth} tree: SDK and sim calls, "
        f"nothing else) take {sdk_ms:.2f} ms per agent; raw Celery makes none, so covey's CPU per agent "
        f"can be no less than ({raw_ms:.2f} + {sdk_ms:.2f}) / {raw_ms:.2f} = {(raw_ms + sdk_ms) / raw_ms:.2f}× "
        f"raw Celery's while its agents call their model through the SDK."
    )


def run_all(repeats: int, logs: Path) -> dict:
    """Every shape on every concurrency, and the costs per agent of the largest tree on
    the most slots; whatever it starts is stopped before it returns or raises."""
    rows, cost = [], {}
    with ExitStack() as stack:
        server, r = private_redis(stack)
        for concurrency in CONCURRENCIES:
            with ExitStack() as workers:
                client, raw_app, pids = start_workers(workers, server.url, concurrency, logs)
                pids["redis"] = server.proc.pid
                for width, depth in SHAPES:
                    rows.append([width, depth, concurrency, measure(client, raw_app, width, depth, repeats)])
                    print(f"measured {width}×{depth} on {concurrency} slot(s)", file=sys.stderr)
                if concurrency == max(CONCURRENCIES):
                    width, depth = max(SHAPES, key=lambda shape: agents(*shape))
                    cost = {"tree": [width, depth], **costs(client, raw_app, pids, r, width, depth, COST_TREES)}
    return {
        "rows": sorted(rows),
        "costs": cost,
        "repeats": repeats,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per measurement, after one warm-up")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(
        lambda logs: run_all(args.repeats, logs),
        lambda figures: f"{table(figures['rows'])}\n\n{cost_table(figures, None)}",
        args.json,
    )


if __name__ == "__main__":
    interruptible(main)
