"""How much of the model's latency covey hides at scale: wall time against the critical path.

Run from the repo root: ``python bench/scale.py [--repeats N] [--sdk] [--json PATH]``.

Every model call of ``[sim:spawn width=W depth=2] [sim:latency 500]`` takes 500 ms
(the children inherit the latency directive). However wide the tree, its critical
path is five calls in a row (the root spawns, a child spawns, a leaf answers, the
child finishes, the root finishes): 2.5 s. A runtime that overlaps every agent's
waits finishes close to that, so wall time / critical path is what it failed to
hide: agents queued for a slot, and its own work per agent. The trees run on three
``covey worker`` subprocesses (no flags, as a user gets it; ``--pool threads
--concurrency 500``; ``--pool gevent --concurrency 500``), as plain Celery tasks
of ``bench/raw_tree.py`` sleeping through the same calls on workers of the threads
column's shape (Celery's own floor; with ``--sdk``, also making those calls
through the ``openai`` SDK on the in-process sim, as covey's agents do), and as Ray async actors
making the same waits (when Ray is installed: ``pip install -e '.[bench]'``), in
interleaved rounds. Beside the wall times is the CPU the worker processes spent
per agent (Ray's excepted), which a machine busy with other work disturbs less. A
configuration that fails is reported as failed, the others still measured. A
private redis-server, the workers and Ray are started here and stopped on exit,
Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from textwrap import shorten
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/scale.py` puts bench/, not the root, on the path

from celery import Celery

from bench import raw_tree
from bench.fanout import agents, sim_calls
from bench.harness import RedisServer, Worker, children, cpu_seconds, interruptible, report, start_redis
from covey.client import Client
from covey.config.settings import Settings

LATENCY_MS = 500
DEPTH = 2
WIDTHS = (10, 30)  # 111 and 931 agents
CRITICAL_PATH = (2 * DEPTH + 1) * LATENCY_MS / 1000  # a spawn and a finish per level above the leaves, and a leaf
SLOTS = "500"
WORKERS = {  # configuration -> the flags `covey worker` gets besides --loglevel and --hostname
    "defaults": [],
    "threads": ["--pool", "threads", "--concurrency", SLOTS],
    "gevent": ["--pool", "gevent", "--concurrency", SLOTS],
}
LABELS = {
    "defaults": "`covey worker`, no flags",
    "threads": f"threads, -c {SLOTS}",
    "gevent": f"gevent, -c {SLOTS}",
    "raw": f"raw Celery, threads, -c {SLOTS}",
    "raw_sdk": f"raw Celery + SDK calls, threads, -c {SLOTS}",
    "ray": "Ray async actors",
}
COMMAND = "python bench/scale.py"
Run = Callable[[int], float]  # a tree of the given width on one configuration; its wall seconds
Pids = Callable[[], list[int]]  # the processes that run a configuration's agents


def task(width: int) -> str:
    return f"[sim:spawn width={width} depth={DEPTH}] [sim:latency {LATENCY_MS}] bench"


def timeout(width: int) -> float:
    """Longer than making every call of the tree one after another, and a minute:
    a tree still running then is hung, not slow."""
    return sim_calls(width, DEPTH) * LATENCY_MS / 1000 + 60


# --- covey ---


def run_covey(client: Client, width: int) -> float:
    # Caps far above the tree's needs, so the ledger does its real accounting and refuses nothing.
    budget = {"max_tokens": 100_000_000, "max_cycles": 10_000, "max_agents": 10_000, "max_depth": DEPTH}
    spec = client.spec(task(width), budget=budget)
    start = time.perf_counter()
    result = client.submit(spec).result(timeout=timeout(width))
    elapsed = time.perf_counter() - start
    usage = (result.usage.agents, result.usage.cycles)
    if result.output != f"leaves={width**DEPTH}" or usage != (agents(width, DEPTH) - 1, sim_calls(width, DEPTH)):
        raise RuntimeError(f"covey answered {result.status.value} {result.output!r} {result.error or ''} {usage}")
    return elapsed


def stop(worker: Worker) -> None:
    """A worker hung on a failed tree ignores the warm shutdown and ``Worker.stop``
    kills it; the failure is reported already, so that is no error here."""
    with suppress(subprocess.TimeoutExpired):
        worker.stop()


def start_workers(
    stack: ExitStack, redis_url: str, logs: Path, failed: dict[str, str], pids: dict[str, Pids]
) -> dict[str, Run]:
    """A worker per configuration, each on its own queue; a run of the tree on each
    that got ready (and in ``pids`` its worker processes), and in ``failed`` why any
    other did not."""
    runs = {}
    for name, flags in WORKERS.items():
        hostname = f"{name}@scale"
        worker = Worker(
            hostname,
            [sys.executable, "-m", "covey", "worker", *flags, "--loglevel", "warning", "--hostname", hostname],
            redis_url,
            f"bench-scale-{name}",
            logs,
        )
        stack.callback(stop, worker)
        client = Client(Settings(redis_url=redis_url, queue=f"bench-scale-{name}"))
        stack.callback(client.close)
        try:
            worker.wait_ready(client.app)
        except RuntimeError as e:
            fail(failed, name, f"start: {e}")
            continue
        runs[name] = lambda width, client=client: run_covey(client, width)
        pids[name] = lambda pid=worker.proc.pid: children(pid)
    return runs


# --- raw Celery ---


def run_raw(app: Celery, width: int, sdk: bool = False) -> float:
    start = time.perf_counter()
    leaves = app.send_task(raw_tree.NODE, args=[width, DEPTH, LATENCY_MS / 1000, sdk]).get(timeout=timeout(width))
    elapsed = time.perf_counter() - start
    if leaves != width**DEPTH:
        raise RuntimeError(f"raw Celery counted {leaves} leaves")
    return elapsed


def start_raw(
    stack: ExitStack,
    redis_url: str,
    logs: Path,
    failed: dict[str, str],
    runs: dict[str, Run],
    pids: dict[str, Pids],
    sdk: bool = False,
) -> None:
    """A raw Celery worker process per core, each ``--pool threads --concurrency
    SLOTS`` as the threads column's ``covey worker`` runs them, and a run of the tree
    on them added to ``runs`` and ``pids`` (or in ``failed`` why they did not get
    ready); with ``sdk``, a run whose calls go through the SDK too (``raw_sdk``)."""
    queue = "bench-scale-raw"
    app = raw_tree.create_app(Settings(redis_url=redis_url, queue=queue))
    workers = []
    for i in range(1, os.cpu_count() + 1):
        hostname = f"raw-{i}@scale"
        flags = ["--pool", "threads", "--concurrency", SLOTS, "--loglevel", "warning"]
        worker = Worker(hostname, raw_tree.worker_argv(queue, hostname, *flags), redis_url, queue, logs)
        stack.callback(stop, worker)
        workers.append(worker)
    try:
        for worker in workers:
            worker.wait_ready(app)
    except RuntimeError as e:
        fail(failed, "raw", f"start: {e}")
        return
    runs["raw"] = lambda width: run_raw(app, width)
    pids["raw"] = lambda: [worker.proc.pid for worker in workers]
    if sdk:
        runs["raw_sdk"] = lambda width: run_raw(app, width, sdk=True)
        pids["raw_sdk"] = pids["raw"]


# --- Ray ---


class RayAgent:
    """Agents as calls on a Ray async actor: each waits out its model calls and
    gathers its children as remote calls, spread over every actor.

    No SDK, sim or ledger work: this is Ray's orchestration alone, the floor to
    compare covey's against.
    """

    async def run(self, width: int, depth: int, peers: list) -> int:
        await asyncio.sleep(LATENCY_MS / 1000)  # the call that spawns, or a leaf's answer
        if depth == 0:
            return 1
        leaves = await asyncio.gather(
            *(peers[i % len(peers)].run.remote(width, depth - 1, peers) for i in range(width))
        )
        await asyncio.sleep(LATENCY_MS / 1000)  # the call that finishes
        return sum(leaves)


def start_ray(stack: ExitStack, runs: dict[str, Run]) -> str | None:
    """Ray with an async actor per core, and a run of the tree on them added to
    ``runs``; Ray's version, or None when it is not installed."""
    try:
        import ray
    except ImportError:
        return None
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="warning", log_to_driver=False)
    stack.callback(ray.shutdown)
    peers = [ray.remote(RayAgent).remote() for _ in range(os.cpu_count())]

    def run(width: int) -> float:
        start = time.perf_counter()
        leaves = ray.get(peers[0].run.remote(width, DEPTH, peers), timeout=timeout(width))
        elapsed = time.perf_counter() - start
        if leaves != width**DEPTH:
            raise RuntimeError(f"Ray counted {leaves} leaves")
        return elapsed

    runs["ray"] = run
    return ray.__version__


# --- measuring and reporting ---


def fail(failed: dict[str, str], name: str, why: str) -> None:
    failed[name] = why
    print(f"{name} failed, not run again: {why}", file=sys.stderr)


Medians = dict[int, dict[str, float]]  # tree width -> configuration -> a median


def measure(
    runs: dict[str, Run], pids: dict[str, Pids], repeats: int, failed: dict[str, str]
) -> tuple[Medians, Medians]:
    """Medians over ``repeats`` rounds, each running every tree on every configuration
    in turn so drift hits all alike, after a warm-up round on the smaller tree: of
    wall seconds, and of the CPU seconds per agent of the configurations in ``pids``.

    A configuration that fails or hangs goes in ``failed`` and is not run again,
    so one broken pool costs one timeout, not the other figures.
    """
    times: dict[int, dict[str, list[float]]] = {width: {name: [] for name in runs} for width in WIDTHS}
    cpu: dict[int, dict[str, list[float]]] = {width: {name: [] for name in pids} for width in WIDTHS}
    for round_ in range(repeats + 1):
        for width in WIDTHS[:1] if round_ == 0 else WIDTHS:
            for name, run in runs.items():
                if name in failed:
                    continue
                procs = pids[name]() if name in pids else []
                used = sum(map(cpu_seconds, procs))
                try:
                    seconds = run(width)
                except Exception as e:
                    fail(failed, name, f"{agents(width, DEPTH)} agents: {e}")
                    continue
                print(
                    f"{'warm-up' if round_ == 0 else f'round {round_}'}: {agents(width, DEPTH)} agents "
                    f"on {name}: {seconds:.1f} s",
                    file=sys.stderr,
                )
                if round_:
                    times[width][name].append(seconds)
                    if procs:
                        cpu[width][name].append((sum(map(cpu_seconds, procs)) - used) / agents(width, DEPTH))

    def medians(samples: dict[int, dict[str, list[float]]]) -> Medians:
        return {
            width: {
                name: statistics.median(values) for name, values in by_name.items() if values and name not in failed
            }
            for width, by_name in samples.items()
        }

    return medians(times), medians(cpu)


def run_all(repeats: int, logs: Path, sdk: bool = False) -> dict[str, Any]:
    """The figures as JSON; whatever it starts is stopped before it returns or raises."""
    with ExitStack() as stack:
        server = RedisServer()
        stack.callback(server.stop)
        start_redis(server)
        failed: dict[str, str] = {}
        pids: dict[str, Pids] = {}
        runs = start_workers(stack, server.url, logs, failed, pids)
        start_raw(stack, server.url, logs, failed, runs, pids, sdk)
        ray_version = start_ray(stack, runs)
        medians, cpu = measure(runs, pids, repeats, failed)
    return {
        "latency_ms": LATENCY_MS,
        "critical_path_s": CRITICAL_PATH,
        "repeats": repeats,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "ray": ray_version,
        "failed": failed,
        "sdk": sdk,
        "trees": [
            {
                "width": width,
                "depth": DEPTH,
                "agents": agents(width, DEPTH),
                "sim_calls": sim_calls(width, DEPTH),
                "seconds": medians[width],
                "cpu_ms_per_agent": {name: seconds * 1000 for name, seconds in cpu[width].items()},
            }
            for width in WIDTHS
        ],
    }


def _cell(figures: dict[str, Any], n: int, name: str) -> str:
    if name in figures["failed"]:
        return "failed"
    seconds = next((t["seconds"].get(name) for t in figures["trees"] if t["agents"] == n), None)
    if seconds is None:
        return "—"
    return f"{seconds:.1f} s ({seconds / figures['critical_path_s']:.2f}×)"


def _cpu_cell(figures: dict[str, Any], n: int, name: str) -> str:
    tree: dict[str, Any] = next((t for t in figures["trees"] if t["agents"] == n), {})
    ms = tree.get("cpu_ms_per_agent", {}).get(name)  # figures of an older scale.py have none
    return "—" if ms is None else f"{ms:.2f}"


def table(after: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """Agents by configuration: median seconds and wall / critical path (a row per
    commit when compared), then why any configuration failed or was not run."""
    runs = [("", after)] if before is None else [("before", before), ("after", after)]
    run_column = (" run |", "---|") if before else ("", "")
    shown = [name for name in LABELS if name != "raw_sdk" or after.get("sdk")]  # raw + SDK only with --sdk
    lines = [
        "| agents | sim calls |" + run_column[0] + "".join(f" {LABELS[name]} |" for name in shown),
        "|---:|---:|" + run_column[1] + "---:|" * len(shown),
    ]
    for tree in after["trees"]:
        for label, figures in runs:
            cells = "".join(f" {_cell(figures, tree['agents'], name)} |" for name in shown)
            lines.append(f"| {tree['agents']} | {tree['sim_calls']} |" + (f" {label} |" if before else "") + cells)
    measured = [name for name in shown if name != "ray"]
    lines += [
        "\nWorker CPU per agent, ms (every worker process of the configuration; medians of the rounds):\n",
        "| agents |" + run_column[0] + "".join(f" {LABELS[name]} |" for name in measured),
        "|---:|" + run_column[1] + "---:|" * len(measured),
    ]
    for tree in after["trees"]:
        for label, figures in runs:
            cells = "".join(f" {_cpu_cell(figures, tree['agents'], name)} |" for name in measured)
            lines.append(f"| {tree['agents']} |" + (f" {label} |" if before else "") + cells)
    for label, figures in runs:
        prefix = f"{label}: " if label else ""
        if figures["ray"] is None:
            lines.append(f"\n{prefix}Ray was not installed (`pip install -e '.[bench]'`), so it did not run.")
        lines += [f"\n{prefix}{LABELS[name]} failed at {shorten(why, 300)}" for name, why in figures["failed"].items()]
    return "\n".join(lines)


def section(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    """The BENCHMARKS.md section for these figures, beside ``before``'s (the same JSON from an older commit)."""
    ray = f"Ray {after['ray']}" if after["ray"] else "Ray"
    rounds = "One round" if after["repeats"] == 1 else f"Medians of {after['repeats']} interleaved rounds"
    compared = (
        " Before and after are two commits measured on the same machine, each `covey worker` with"
        " its own commit's defaults."
        if before
        else ""
    )
    return f"""## Latency hidden at scale (`bench/scale.py`)

Real model calls take seconds, so what decides a wide tree's wall time is whether
its agents' calls overlap. Every call of the `[sim:spawn width=W depth={DEPTH}]` trees
here takes {after["latency_ms"]} ms (`[sim:latency {after["latency_ms"]}]`), so however wide the tree, its
critical path is {2 * DEPTH + 1} calls in a row: {after["critical_path_s"]:g} s. Beside each median is wall time
over that path: 1× hides every wait, and what is above it is agents queued for a
slot plus the runtime's own work per agent, here on {after["cores"]} cores. The covey columns
are `covey worker` subprocesses: with no pool or concurrency flags (what a user
gets), with `--pool threads --concurrency {SLOTS}`, and with `--pool gevent
--concurrency {SLOTS}`. Raw Celery runs the same tree as plain Celery tasks of
`bench/raw_tree.py` with covey's Celery configuration: an agent sleeps {after["latency_ms"]} ms for
each call it would make (a leaf once; a spawning agent before it replaces itself
with `chord(group(children), join)`, and again in the join), on a `celery worker
--pool threads --concurrency {SLOTS}` process per core, the threads column's pools.
It has no SDK, sim, ledger, checkpoint or tree record, so it is the floor Celery
itself sets for this tree with slots to spare: what is above it in the threads
column is covey's. {ray} runs the same tree as calls on an async actor per
core, each agent sleeping through its calls and gathering its children as remote
calls: no SDK, sim or ledger work either, so it is another runtime's floor to
compare against. The second table is the CPU every worker process of a column
spent per agent, which other work on the machine moves less than wall time.
{rounds} after a warm-up, Python {after["python"]}.{compared}

```
{COMMAND} --repeats {after["repeats"]}
```

{table(after, before)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="timed rounds, after a warm-up on the smaller tree")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--sdk", action="store_true", help="also run raw Celery making the same SDK calls")
    args = parser.parse_args()
    report(
        lambda logs: run_all(args.repeats, logs, args.sdk),
        table,
        args.json,
        keep_logs=lambda figures: bool(figures["failed"]),
    )


if __name__ == "__main__":
    interruptible(main)
