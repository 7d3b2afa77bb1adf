"""What a covey sweep costs against a raw Celery group of the same size, as a user waits for it.

Run from the repo root: ``python bench/sweep.py [--samples 500,2000] [--latency 0,50]
[--rounds 3] [--max-in-flight 64] [--concurrency 4] [--sdk] [--default-worker] [--json PATH]
[--profile DIR]``;
``bench/all.py`` runs it with the other benchmarks and writes BENCHMARKS.md.

- covey: ``covey sweep`` over N arithmetic samples (``single`` on the sim model,
  scored numerically), on a real ``covey worker``: every sample is a covey job
  with its ledger reservation, tree records, a sim call through the openai SDK,
  its claim and result line, and at most
  ``--max-in-flight`` jobs enqueued at once.
- raw: one ``group`` of N leaf tasks of ``bench/raw_tree.py`` (covey's Celery
  configuration, no covey code) sent at once and joined with ``.get()``, as a
  script would do it without covey: no cap, no resume, every result held.
- raw + SDK (``--sdk``): the same group, each task asking its sample's question
  through the ``openai`` SDK (the in-process sim, as covey's worker does) and
  the submitter scoring the answers: what a script without covey's runtime pays
  for the same model calls, so covey / (raw + SDK) is the runtime's own share.

Both sides' workers are one process of ``--pool threads --concurrency C``; with
``--default-worker`` covey's is ``covey worker`` with no flags (a process per core,
each of 100 threads) and raw Celery runs a worker process per core of 100 threads.

Both are timed from the command's start to its exit, imports included, each
submitter a child process whose peak resident memory is its own (``wait4``'s
rusage). ``--latency MS`` gives each sim model call that latency (``[sim:latency
MS]`` in the prompt); a raw leaf sleeps as long as the covey sample's call does.
Rounds alternate which side goes first; figures are medians. The Redis commands
a side sent are counted from ``INFO commandstats`` (reset before each run).
``--profile DIR`` instead runs one covey sweep of the largest size at the first
latency under ``py-spy`` (the submitter, and the worker attached) and writes
both raw profiles and the commands per sample to DIR. A private redis-server and
both workers are started here and stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/sweep.py` puts bench/, not the root, on the path

from bench import raw_tree
from bench.fanout import ONE_PROCESS
from bench.harness import RedisServer, Worker, children, cpu_seconds, start_redis
from covey.client import Client
from covey.config.settings import DEFAULT_SLOTS, Settings

COVEY_QUEUE, RAW_QUEUE = "bench-sweeps", "bench-raw"
GRID = 'strategies = ["single"]\nscorer = "numeric"\nbudgets = [{max_tokens = 2000, max_cycles = 2}]\n'
T = TypeVar("T")
CALLS = 1  # model calls per sample: `single` offers no tools, so the sim answers the sum at once


def child(argv: list[str], redis_url: str, **settings: str) -> tuple[float, int, float, str]:
    """Run a submitter; its wall seconds from start to exit, peak RSS in MiB, CPU seconds and standard output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update(COVEY_REDIS_URL=redis_url, COVEY_MODEL="sim", PYTHONPATH=str(ROOT), **settings)
    with tempfile.TemporaryFile(mode="w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited with {proc.returncode}:\n{text[-2000:]}")
    return seconds, usage.ru_maxrss // 1024, usage.ru_utime + usage.ru_stime, text  # ru_maxrss is KiB on Linux


def dataset(directory: Path, n: int, latency_ms: int) -> Path:
    path = directory / f"samples-{n}-{latency_ms}.jsonl"
    with path.open("w") as f:
        for i in range(n):
            asked, target = raw_tree.question(i, latency_ms)
            f.write(json.dumps({"id": i, "input": asked, "target": target}) + "\n")
    return path


class Bench:
    """A private Redis, a covey worker and raw workers, and the runs on them.

    By default both sides are one process of ``--pool threads --concurrency C``.
    With ``default_worker`` covey's is ``covey worker`` with no flags (a process per
    core, each of ``DEFAULT_SLOTS`` threads), and raw Celery runs a worker process
    per core of as many threads: the same pools."""

    def __init__(
        self, stack: ExitStack, work: Path, concurrency: int, max_in_flight: int, default_worker: bool = False
    ) -> None:
        self.work, self.max_in_flight = work, max_in_flight
        self.server = RedisServer()
        start_redis(self.server)
        stack.callback(self.server.stop)
        slots = DEFAULT_SLOTS["threads"] if default_worker else concurrency
        opts = ["--concurrency", str(slots), "--pool", "threads", "--loglevel", "warning"]
        covey_opts = ["--loglevel", "warning"] if default_worker else opts
        covey_opts += ["--queues", COVEY_QUEUE, "--hostname", "sweep@bench"]
        self.covey = Worker(
            "sweep@bench",
            [sys.executable, "-m", "covey", "worker", *covey_opts],
            self.server.url,
            COVEY_QUEUE,
            work,
            env=None if default_worker else ONE_PROCESS,
        )
        stack.callback(self.covey.stop)
        names = [f"raw-{i}@bench" for i in range(1, (os.cpu_count() or 1) + 1)] if default_worker else ["raw@bench"]
        self.raws = [
            Worker(name, raw_tree.worker_argv(RAW_QUEUE, name, *opts), self.server.url, RAW_QUEUE, work)
            for name in names
        ]
        for raw in self.raws:
            stack.callback(raw.stop)
        self.client = Client(Settings(redis_url=self.server.url, queue=COVEY_QUEUE))
        stack.callback(self.client.close)
        self.covey.wait_ready(self.client.app)
        for raw in self.raws:
            raw.wait_ready(raw_tree.create_app(Settings(redis_url=self.server.url, queue=RAW_QUEUE)))
        grid = work / "grid.toml"
        grid.write_text(GRID)
        self.runs = 0

    def sweep_argv(self, n: int, latency_ms: int) -> list[str]:
        self.runs += 1
        return [
            *("-m", "covey", "sweep", str(dataset(self.work, n, latency_ms))),
            *("--grid", str(self.work / "grid.toml"), "--out", str(self.work / f"out-{self.runs}")),
            *("--max-in-flight", str(self.max_in_flight), "--queue", COVEY_QUEUE, "--json"),
        ]

    def covey_run(self, n: int, latency_ms: int) -> dict:
        (seconds, mib, cpu, out), costs = self.costs(
            self.covey_pids, lambda: child([sys.executable, *self.sweep_argv(n, latency_ms)], self.server.url)
        )
        (row,) = json.loads(out)
        if row["accuracy"] != 1:
            raise RuntimeError(f"the covey sweep scored {row['accuracy']:.0%}, not 100%")
        return {"seconds": seconds, "peak_mib": mib, "submitter_cpu": cpu, **costs}

    def raw_run(self, n: int, latency_ms: int) -> dict:
        return self.raw_group([str(n), str(CALLS * latency_ms / 1000)], "sum", n, "the raw group summed")

    def sdk_run(self, n: int, latency_ms: int) -> dict:
        args = ["--sdk", str(n), str(latency_ms)]
        return self.raw_group(args, "right", n, "the raw group's SDK calls answered right")

    def raw_group(self, args: list[str], figure: str, n: int, what: str) -> dict:
        """A ``bench/raw_tree.py`` submitter run with ``args`` on the raw worker, the
        ``figure`` it prints checked to be ``n`` (``what`` it is, in the error)."""
        argv = [sys.executable, "-m", "bench.raw_tree", *args]
        (seconds, mib, cpu, out), costs = self.costs(
            [raw.proc.pid for raw in self.raws], lambda: child(argv, self.server.url, COVEY_QUEUE=RAW_QUEUE)
        )
        if json.loads(out)[figure] != n:
            raise RuntimeError(f"{what} {out}, not {n}")
        return {"seconds": seconds, "peak_mib": mib, "submitter_cpu": cpu, **costs}

    @property
    def covey_pids(self) -> list[int]:
        """The covey worker's processes: a ``covey worker`` of several runs one per core."""
        return [self.covey.proc.pid, *children(self.covey.proc.pid)]

    def costs(self, workers: list[int], run: Callable[[], T]) -> tuple[T, dict]:
        """``run``'s result, and the Redis commands and CPU (Redis's, the ``workers``'
        processes') it took."""
        self.client.redis.config_resetstat()
        redis_cpu, worker_cpu = cpu_seconds(self.server.proc.pid), sum(map(cpu_seconds, workers))
        result = run()
        redis_cpu = cpu_seconds(self.server.proc.pid) - redis_cpu
        worker_cpu = sum(map(cpu_seconds, workers)) - worker_cpu
        return result, {"commands": self.commands(), "redis_cpu": redis_cpu, "worker_cpu": worker_cpu}

    def commands(self) -> dict[str, int]:
        """Redis commands since the last reset, by name (``INFO commandstats``)."""
        return {name: calls for name, (calls, _) in self.command_stats().items()}

    def command_stats(self) -> dict[str, tuple[int, int]]:
        """Each command's calls and server microseconds since the last reset."""
        stats = self.client.redis.info("commandstats")
        stats.pop("cmdstat_config|resetstat", None)
        return {name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for name, v in stats.items()}

    def profile(self, n: int, latency_ms: int, into: Path, gil: bool = False) -> dict:
        """One covey sweep under py-spy, the submitter run by it and the worker attached
        (``gil``: only its GIL's holder sampled)."""
        into.mkdir(parents=True, exist_ok=True)
        spy = ["py-spy", "record", "--rate", os.environ.get("SPY_RATE", "100"), "--format", "raw", "--nonblocking"]
        worker = subprocess.Popen(
            [
                *spy,
                *(["--gil"] if gil else []),
                "--output",
                str(into / "worker.txt"),
                "--pid",
                str(self.covey.proc.pid),
                "--subprocesses",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)  # attached before the first job
        self.client.redis.config_resetstat()
        argv = [*spy, "--output", str(into / "submitter.txt"), "--", sys.executable, *self.sweep_argv(n, latency_ms)]
        seconds, _, _, _ = child(argv, self.server.url)
        stats = self.command_stats()
        worker.send_signal(2)  # py-spy writes its profile on SIGINT
        worker.wait(timeout=60)
        per_sample = {
            k: {"calls": round(calls / n, 2), "usec": round(usec / n, 1)}
            for k, (calls, usec) in sorted(stats.items(), key=lambda kv: -kv[1][0])
        }
        figures = {"samples": n, "latency_ms": latency_ms, "seconds": seconds, "commands_per_sample": per_sample}
        (into / "commands.json").write_text(json.dumps(figures, indent=2) + "\n")
        return figures


def start_seconds() -> float:
    """The command's own start: ``covey sweep --help`` from start to exit."""
    seconds, _, _, _ = child([sys.executable, "-m", "covey", "sweep", "--help"], "redis://127.0.0.1:1")
    return seconds


def median_run(runs: list[dict]) -> dict:
    """The median of each figure over the rounds; the commands of the median-time round."""
    middle = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    figures = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "commands"}
    figures["commands"] = sum(middle["commands"].values())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", default="500,2000", help="comma-separated sample counts")
    parser.add_argument("--latency", default="0,50", help="comma-separated sim model latencies, in ms")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="profile one covey sweep instead")
    parser.add_argument("--gil", action="store_true", help="with --profile: sample only the worker's GIL holder")
    parser.add_argument("--sdk", action="store_true", help="also time a raw group making the same SDK calls")
    parser.add_argument(
        "--default-worker",
        action="store_true",
        help="covey worker with no flags, against a raw worker per core of as many threads",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.samples.split(",")]
    latencies = [int(ms) for ms in args.latency.split(",")]
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="covey-bench-sweep-")))
        bench = Bench(stack, work, args.concurrency, args.max_in_flight, args.default_worker)
        if args.profile:
            print(json.dumps(bench.profile(max(sizes), latencies[0], args.profile, args.gil), indent=2))
            return
        kinds = [("covey", bench.covey_run), ("raw", bench.raw_run)] + ([("sdk", bench.sdk_run)] if args.sdk else [])
        for _, run in kinds:  # the workers' first jobs pay for their imports and connections
            run(20, 0)
        rounds: dict[tuple[int, int], dict[str, list[dict]]] = {
            (n, ms): {side: [] for side, _ in kinds} for ms in latencies for n in sizes
        }
        starts = []
        for i in range(args.rounds):
            starts.append(start_seconds())
            for (n, ms), runs in rounds.items():
                sides = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]  # each side goes first in turn
                for side, run in sides:
                    runs[side].append(run(n, ms))
                    print(
                        f"round {i + 1}: {side} {n} samples at {ms} ms: {runs[side][-1]['seconds']:.2f}s",
                        file=sys.stderr,
                    )

    figures = {
        "concurrency": args.concurrency,
        "default_worker": args.default_worker,
        "max_in_flight": args.max_in_flight,
        "rounds": args.rounds,
        "start_seconds": statistics.median(starts),
        "rows": [
            {
                "samples": n,
                "latency_ms": ms,
                "covey": median_run(runs["covey"]),
                "raw": median_run(runs["raw"]),
                "ratios": [c["seconds"] / r["seconds"] for c, r in zip(runs["covey"], runs["raw"])],
                **(
                    {
                        "sdk": median_run(runs["sdk"]),
                        "sdk_ratios": [c["seconds"] / r["seconds"] for c, r in zip(runs["covey"], runs["sdk"])],
                    }
                    if args.sdk
                    else {}
                ),
            }
            for (n, ms), runs in rounds.items()
        ],
    }
    print(table(figures, None))
    if args.sdk:
        print(sdk_table(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def table(after: dict, before: dict | None) -> str:
    runs = [("before", before), ("after", after)] if before else [("", after)]
    lines = [
        "| | model latency | samples | covey sweep | raw group | covey / raw time (median of the rounds') "
        "| Redis commands per sample (covey / raw) | CPU ms per sample, submitter + worker + Redis (covey / raw) "
        "| submitter peak MiB (covey / raw) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, f in runs:
        for row in f["rows"]:
            n, covey, raw = row["samples"], row["covey"], row["raw"]
            lines.append(
                f"| {label} | {row['latency_ms']} ms | {n:,} | {covey['seconds']:.2f} s | {raw['seconds']:.2f} s "
                f"| {statistics.median(row['ratios']):.2f}× | {covey['commands'] / n:.1f} / {raw['commands'] / n:.1f} "
                f"| {cpu_ms(covey, n)} / {cpu_ms(raw, n)} | {covey['peak_mib']:.0f} / {raw['peak_mib']:.0f} |"
            )
    return "\n".join(lines)


def sdk_table(figures: dict) -> str:
    """covey against a raw group making the same SDK calls (``--sdk``)."""
    lines = [
        "| model latency | samples | covey sweep | raw group + SDK calls | covey / (raw + SDK) time (median of the "
        "rounds') | CPU ms per sample, submitter + worker + Redis (covey / raw + SDK) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in figures["rows"]:
        n, covey, sdk = row["samples"], row["covey"], row["sdk"]
        lines.append(
            f"| {row['latency_ms']} ms | {n:,} | {covey['seconds']:.2f} s | {sdk['seconds']:.2f} s "
            f"| {statistics.median(row['sdk_ratios']):.2f}× | {cpu_ms(covey, n)} / {cpu_ms(sdk, n)} |"
        )
    return "\n".join(lines)


def cpu_ms(side: dict, n: int) -> str:
    return " + ".join(f"{side[k] * 1000 / n:.1f}" for k in ("submitter_cpu", "worker_cpu", "redis_cpu"))


def section(after: dict, before: dict | None) -> str:
    start = f"{after['start_seconds']:.2f} s" + (f" ({before['start_seconds']:.2f} s before)" if before else "")
    return f"""## Sweeps (`bench/sweep.py`)

It runs N arithmetic samples (`single` on the `sim` model, scored) as a `covey
sweep` with `--max-in-flight {after["max_in_flight"]}` on a one-process `covey worker` with
{after["concurrency"]} thread slots, then the same N tasks as one raw Celery `group` on a worker of
`bench/raw_tree.py` with the same slots, each timed from the command's start to
its exit. The covey side does everything a sweep does per sample: validation, a
ledger scope charged by every job, a Redis claim per unit and its job's index
entry (each one round trip for a whole fill of the window), the bounded window
polled in batches with no result subscription, a model call, a scored line
streamed to `results.jsonl`; the raw side only sends and collects, its leaf
sleeping as long as the model call. Every covey sweep scored
100%. Medians of {after["rounds"]} rounds, the two sides alternating which goes first. The
peak memory at two sample counts shows whether the submitter's grows with the
sweep. `covey sweep --help`, the command's start alone, takes {start}.

{table(after, before)}
"""


if __name__ == "__main__":
    main()
