"""How many agents one worker process holds in flight, and the memory each one costs.

Run from the repo root: ``python bench/capacity.py [--burst N,N,...] [--steady N,N,...] [--json PATH]``.

Every agent here makes one model call that takes 5 s (``[sim:latency 5000]``) and
answers, so with slots to spare each finishes 5 s after it was sent. They run on
ONE ``covey worker`` process (``--processes 1 --pool P --concurrency N``, a fresh
one for each run), sent two ways: a *burst* of N at once, and a *steady* stream
of N / 5.5 s a second, which a process within 10% holds N of in flight. An
agent's wall time runs from its submit's return to the worker storing its result
(Celery's ``date_done``), so the sender's pace is not counted against the worker.
What an agent takes beyond the 5 s is the process's own work (taking the task,
the ledger, checkpoints, the SDK, storing the result) and its wait for the
process's one core while the others do theirs. For each pool N steps up until
the 99th percentile agent takes more than 10% over 5 s.

The worker's resident memory (``/proc/PID/status`` VmRSS) is read before the
agents are sent (after a warm-up job, so every module is loaded) and every 50 ms
while they run; its peak minus that idle figure, over N, is the memory of an
agent in flight. The worker's CPU seconds over the run, over the agents sent, is
the CPU an agent costs. A private redis-server and the workers are started here
and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/capacity.py` puts bench/, not the root, on the path

import redis

from bench.harness import Worker, cpu_seconds, interruptible, private_redis, report
from covey.client import Client
from covey.config.settings import MAX_CONCURRENCY, Settings

LATENCY_MS = 5000
LIMIT = 0.10  # the overhead on an agent's wall time a process may add before it holds too many
POOLS = ("threads", "gevent")
SIZES = {"burst": [25, 50, 100, 200], "steady": [100, 250, 500, 1000]}  # agents in flight, stepped up per pool
STEADY_SECONDS = 20.0  # of sending at a steady rate: the last three quarters are measured
SENDERS = 8  # threads that submit: one alone takes a second or more to send a thousand jobs
SAMPLE_SECONDS = 0.05
COMMAND = "python bench/capacity.py"


def rss_bytes(pid: int) -> int:
    """A process's resident memory now (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Peaks:
    """The highest resident memory of a process, and the most clients connected to
    Redis, sampled on a thread until stopped."""

    def __init__(self, pid: int, r: redis.Redis) -> None:
        self.pid, self.redis = pid, r
        self.rss, self.clients = rss_bytes(pid), self._clients()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _clients(self) -> int:
        return self.redis.info("clients")["connected_clients"]

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.rss, self.clients = max(self.rss, rss_bytes(self.pid)), max(self.clients, self._clients())

    def stop(self) -> tuple[int, int]:
        self._stop.set()
        self._thread.join()
        return self.rss, self.clients


def done_at(client: Client, ids: list[str], seconds: float) -> dict[str, float]:
    """When the worker stored each job's result (epoch seconds), polling every result at once."""
    backend = client.app.backend
    names = [backend.get_key_for_task(i) for i in ids]
    deadline = time.monotonic() + seconds
    while True:
        metas = [backend.decode_result(raw) if raw else {} for raw in backend.mget(names)]
        if all(meta.get("status") in ("SUCCESS", "FAILURE") for meta in metas):
            break
        if time.monotonic() > deadline:
            left = sum(meta.get("status") not in ("SUCCESS", "FAILURE") for meta in metas)
            raise RuntimeError(f"{left} of {len(ids)} jobs not done after {seconds:.0f}s")
        time.sleep(0.2)
    failed = [m["result"] for m in metas if m["status"] != "SUCCESS" or m["result"]["status"] != "completed"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(ids)} jobs did not complete, the first: {failed[0]}")
    return {i: datetime.fromisoformat(meta["date_done"]).timestamp() for i, meta in zip(ids, metas)}


def send(client: Client, times: list[float]) -> dict[str, float]:
    """One-call agents sent from ``SENDERS`` threads, each at its time of ``times``
    (epoch seconds; one already past is sent at once): job id -> when its submit returned."""
    spec = client.spec(f"[sim:latency {LATENCY_MS}] capacity")

    def one(at: float) -> tuple[str, float]:
        time.sleep(max(0.0, at - time.time()))
        handle = client.submit(spec, subscribe=False)
        return handle.id, time.time()

    with ThreadPoolExecutor(SENDERS) as senders:
        return dict(senders.map(one, times))


def schedule(mode: str, n: int, now: float) -> tuple[list[float], float]:
    """When each agent of a run is sent, and from when on the agents sent are measured.

    ``burst``: all N at once. ``steady``: N / (5 s x 1.1) a second for ``STEADY_SECONDS``,
    so once the first have finished a process within the limit holds N in flight on
    average (Little's law: rate x wall time), and only those sent from then on count.
    """
    if mode == "burst":
        return [now] * n, now
    rate = n / (LATENCY_MS / 1000 * (1 + LIMIT))
    return [now + i / rate for i in range(int(rate * STEADY_SECONDS))], now + LATENCY_MS / 1000 * (1 + LIMIT)


def run(mode: str, pool: str, n: int, logs: Path) -> dict[str, Any]:
    """A run of ``mode`` with N agents in flight on a fresh worker process of ``pool`` with N slots.

    Each run has its own redis-server, so what a run leaves there (its worker's
    records, the keys of thousands of jobs) is not on the next run's time."""
    queue = f"bench-capacity-{mode}-{pool}-{n}"
    name = f"{mode}-{pool}-{n}@capacity"
    flags = ["--processes", "1", "--pool", pool, "--concurrency", str(n), "--loglevel", "warning"]
    with ExitStack() as stack:
        server, r = private_redis(stack)
        redis_url = server.url
        argv = [sys.executable, "-m", "covey", "worker", *flags, "--hostname", name]
        worker = Worker(name, argv, redis_url, queue, logs)
        stack.callback(worker.stop)
        client = Client(Settings(redis_url=redis_url, queue=queue))
        stack.callback(client.close)
        worker.wait_ready(client.app)
        client.submit("warm-up").result(timeout=60)  # every module an agent needs is loaded before idle is read
        time.sleep(1)
        pid = worker.proc.pid
        idle, cpu = rss_bytes(pid), cpu_seconds(pid)
        idle_clients = r.info("clients")["connected_clients"]
        peaks = Peaks(pid, r)
        times, counted_from = schedule(mode, n, time.time() + 0.2)
        sent = send(client, times)
        done = done_at(client, list(sent), LATENCY_MS / 1000 * 10 + 120)
        (rss, clients), cpu = peaks.stop(), cpu_seconds(pid) - cpu
    counted = [at for at in sent.values() if at >= counted_from]
    walls = sorted(done[i] - at for i, at in sent.items() if at >= counted_from)
    # Little's law: agents in flight on average = the rate they were sent at x their mean wall time
    held = n if mode == "burst" else (len(counted) - 1) / (max(counted) - min(counted)) * statistics.mean(walls)
    return {
        "mode": mode,
        "pool": pool,
        "agents": n,
        "sent": len(sent),
        "measured": len(walls),
        "held": held,
        "send_seconds": max(sent.values()) - times[0],
        "median_seconds": statistics.median(walls),
        "p99_seconds": walls[int(0.99 * (len(walls) - 1))],
        "slowest_seconds": walls[-1],
        "overhead": walls[int(0.99 * (len(walls) - 1))] / (LATENCY_MS / 1000) - 1,
        "idle_rss": idle,
        "redis_clients": [idle_clients, clients],  # connected, idle and at the peak: the worker's, the sender's, ours
        "peak_rss": rss,
        "rss_per_agent": (rss - idle) / n,
        "cpu_seconds": cpu,
        "cpu_per_agent": cpu / len(sent),
        "cpu_share": cpu / (max(done.values()) - times[0]),  # of one core, over the run: what the machine gave it
    }


def measure(sizes: dict[str, list[int]], logs: Path) -> dict[str, Any]:
    """Each mode and pool at each size in turn, up to the first size past ``LIMIT``."""
    runs = []
    for mode, ns in sizes.items():
        for pool in POOLS:
            for n in ns:
                figures = run(mode, pool, n, logs)
                print(f"{mode}, {pool}, {n} agents: {line(figures)}", file=sys.stderr)
                runs.append(figures)
                if figures["overhead"] > LIMIT:
                    break
    return {
        "latency_ms": LATENCY_MS,
        "limit": LIMIT,
        "steady_seconds": STEADY_SECONDS,
        "sizes": sizes,
        "cores": os.cpu_count(),
        "load": os.getloadavg()[1],  # the machine's, over the last 5 minutes: the others competing for its cores
        "python": platform.python_version(),
        "runs": runs,
    }


def capacity(figures: dict[str, Any], mode: str, pool: str) -> int | None:
    """The most agents in flight of the pool's runs of ``mode`` within the limit."""
    runs = [r for r in figures["runs"] if (r["mode"], r["pool"]) == (mode, pool)]
    return max((r["agents"] for r in runs if r["overhead"] <= figures["limit"]), default=None)


def line(r: dict[str, Any]) -> str:
    return (
        f"p99 {r['p99_seconds']:.2f} s, median {r['median_seconds']:.2f} s, {r['held']:.0f} held, "
        f"{r['rss_per_agent'] / 1024:.0f} KiB and {r['cpu_per_agent'] * 1000:.1f} ms CPU an agent"
    )


def table(figures: dict[str, Any]) -> str:
    call = figures["latency_ms"] / 1000
    lines = [
        "| sent | pool | N | held in flight | p99 agent | median agent | p99 over 5 s | core used "
        "| worker RSS idle → peak | RSS per agent | CPU per agent | agents a whole core holds | Redis clients |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in figures["runs"]:
        lines.append(
            f"| {r['mode']} | {r['pool']} | {r['agents']} | {r['held']:.0f} | {r['p99_seconds']:.2f} s "
            f"| {r['median_seconds']:.2f} s | {r['overhead']:+.0%} | {r['cpu_share']:.0%} "
            f"| {r['idle_rss'] / 2**20:.0f} → {r['peak_rss'] / 2**20:.0f} MiB | {r['rss_per_agent'] / 1024:.0f} KiB "
            f"| {r['cpu_per_agent'] * 1000:.1f} ms | {call / r['cpu_per_agent']:.0f} "
            f"| {' → '.join(map(str, r['redis_clients'])) if 'redis_clients' in r else '—'} |"
        )
    lines.append("")
    for mode in figures["sizes"]:
        for pool in POOLS:
            most = capacity(figures, mode, pool)
            within = f"{most} agents in flight" if most else "no size"
            lines.append(f"- {mode}, {pool}: {within} within {figures['limit']:.0%}")
    return "\n".join(lines)


def section(after: dict[str, Any], before: dict[str, Any] | None) -> str:
    """The BENCHMARKS.md section: ``after`` alone, or ``before``'s table after it."""
    compared = f"\n\nThe same, of the commit before:\n\n{table(before)}" if before else ""
    sizes = " ".join(f"--{mode} {','.join(map(str, ns))}" for mode, ns in after["sizes"].items())
    call = after["latency_ms"] // 1000
    load = f" (a load average of {after['load']:.1f} at the end)" if "load" in after else ""
    return f"""## Agents in flight per worker process (`bench/capacity.py`)

How many agents one `covey worker` process holds at once before its own work adds
{after["limit"]:.0%} to their wall time, and the memory and CPU each costs it. Every agent
makes one model call of {call} s (`[sim:latency {after["latency_ms"]}]`) and answers, on one worker
process (`covey worker --processes 1 --pool P --concurrency N`, a fresh one per
run). *burst*: N agents sent at once. *steady*: agents sent evenly at N / {call * (1 + after["limit"]):g} s a
second for {after["steady_seconds"]:g} s, so a process within the limit holds N in flight on average
(*held*: the rate they were sent at times their mean wall time), and only those
sent after the first {call * (1 + after["limit"]):g} s count. An agent's wall time runs from its submit's
return to the worker storing its result, so the sender's pace is not the
worker's; beyond {call} s it is the process's own work per agent (taking the task,
the ledger, checkpoints, the SDK, storing the result) and its wait for its one
core while the others do theirs. N steps up until the 99th percentile agent
takes {after["limit"]:.0%} more. RSS is the worker's peak while they run (sampled every {SAMPLE_SECONDS * 1000:.0f} ms)
minus its RSS idle after a warm-up job, over N. CPU per agent is the worker's
CPU over the run over the agents sent (a job's start and its result included:
a one-call agent is all start and finish), and *core used* is that CPU
over the run's wall time. An agent costs its process that CPU for each
{call} s it is in flight, so {call} s over it is how many a process with a whole core
to itself holds at 100% of that core: the ceiling, where agents start to queue.
*Redis clients* are the connections the private redis-server had, idle and at
the peak (the worker's pools, the sender's, this script's): what a Redis's
`maxclients` must allow for.
Python {after["python"]}, {after["cores"]} cores shared with the sender and with other work{load}: a
worker that gets less of a core than its agents need falls behind, so the
wall-time columns are a floor, and the CPU and RSS per agent are what to plan with.

```
{COMMAND} {sizes}
```

{table(after)}{compared}
"""


def sizes_of(text: str) -> list[int]:
    sizes = sorted(int(s) for s in text.split(","))
    if not 0 < sizes[0] <= sizes[-1] <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"each between 1 and {MAX_CONCURRENCY}, the most slots of one process")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for mode, sizes in SIZES.items():
        parser.add_argument(
            f"--{mode}",
            type=sizes_of,
            default=sizes,
            metavar="N,N,...",
            help=f"agents in flight of the {mode} runs, comma-separated (default {','.join(map(str, sizes))})",
        )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures to PATH as a JSON object")
    args = parser.parse_args()
    report(lambda logs: measure({mode: getattr(args, mode) for mode in SIZES}, logs), table, args.json)


if __name__ == "__main__":
    interruptible(main)
