"""What a covey sweep costs against a raw Celery group of the same size.

Run from the repo root: ``python bench/sweep.py [--samples 10000] [--max-in-flight 64] [--concurrency 4]
[--json PATH]``; ``bench/all.py`` runs it with the other benchmarks and writes BENCHMARKS.md.

- covey: ``covey sweep`` over N arithmetic samples (``single`` on the sim model,
  scored numerically), on a real ``covey worker``: every sample is a covey job
  with its ledger reservations, tree records, sim call through the openai SDK,
  claim and result line, and at most ``--max-in-flight`` jobs enqueued at once.
- raw: one ``group`` of N leaf tasks of ``bench/raw_tree.py`` (covey's Celery
  configuration, no covey code) sent at once and joined with ``.get()``, as a
  script would do it without covey: no cap, no resume, every result held.

Each submitter runs as a child process, so its peak resident memory is its
own (``wait4``'s rusage). Absolute figures depend on the machine; the ratio
from one run is what to compare. A private redis-server and both workers are
started here and stopped on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/sweep.py` puts bench/, not the root, on the path

from bench import raw_tree
from bench.fanout import ONE_PROCESS
from bench.harness import RedisServer, Worker, start_redis
from covey.client import Client
from covey.config.settings import Settings

COVEY_QUEUE, RAW_QUEUE = "bench-sweeps", "bench-raw"
GRID = 'strategies = ["single"]\nscorer = "numeric"\nbudgets = [{max_tokens = 2000, max_cycles = 2}]\n'


def child(argv: list[str], redis_url: str) -> tuple[float, int, str]:
    """Run a submitter; its wall seconds, peak RSS in MiB, and standard output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update(COVEY_REDIS_URL=redis_url, COVEY_MODEL="sim", PYTHONPATH=str(ROOT))
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
    return seconds, usage.ru_maxrss // 1024, text  # ru_maxrss is KiB on Linux


def raw_submitter(n: int) -> None:
    """The raw baseline, run in a child: one group of N leaves, every result held."""
    from celery import group

    app = raw_tree.create_app(Settings(queue=RAW_QUEUE))
    node = app.signature(raw_tree.NODE)
    results = group(node.clone(args=(1, 0)) for _ in range(n)).apply_async().get(timeout=3600)
    print(json.dumps({"sum": sum(results)}))


def dataset(directory: Path, n: int) -> Path:
    path = directory / "samples.jsonl"
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "input": f"What is {i} + {i % 7}?", "target": i + i % 7}) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--max-in-flight", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    parser.add_argument("--raw-submit", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_submit is not None:
        raw_submitter(args.raw_submit)
        return
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="covey-bench-sweep-")))
        server = RedisServer()
        start_redis(server)
        stack.callback(server.stop)
        opts = ["--concurrency", str(args.concurrency), "--pool", "threads", "--loglevel", "warning"]
        covey = Worker(
            "sweep@bench",
            [sys.executable, "-m", "covey", "worker", *opts, "--queues", COVEY_QUEUE, "--hostname", "sweep@bench"],
            server.url,
            COVEY_QUEUE,
            work,
            env=ONE_PROCESS,
        )
        stack.callback(covey.stop)
        raw = Worker("raw@bench", raw_tree.worker_argv(RAW_QUEUE, "raw@bench", *opts), server.url, RAW_QUEUE, work)
        stack.callback(raw.stop)
        client = Client(Settings(redis_url=server.url, queue=COVEY_QUEUE))
        stack.callback(client.close)
        covey.wait_ready(client.app)
        raw.wait_ready(raw_tree.create_app(Settings(redis_url=server.url, queue=RAW_QUEUE)))

        n = args.samples
        grid = work / "grid.toml"
        grid.write_text(GRID)
        covey_s, covey_mib, covey_out = child(
            [
                sys.executable,
                "-m",
                "covey",
                "sweep",
                str(dataset(work, n)),
                "--grid",
                str(grid),
                "--out",
                str(work / "out"),
                "--max-in-flight",
                str(args.max_in_flight),
                "--queue",
                COVEY_QUEUE,
                "--json",
            ],
            server.url,
        )
        (row,) = json.loads(covey_out)
        raw_s, raw_mib, raw_out = child(
            [sys.executable, str(Path(__file__).resolve()), "--raw-submit", str(n)], server.url
        )
        assert json.loads(raw_out)["sum"] == n

    figures = {
        "samples": n,
        "concurrency": args.concurrency,
        "max_in_flight": args.max_in_flight,
        "covey": {
            "seconds": covey_s,
            "peak_mib": covey_mib,
            "accuracy": row["accuracy"],
            "tokens": row["total_tokens"],
        },
        "raw": {"seconds": raw_s, "peak_mib": raw_mib},
    }
    print(table(figures, None))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


def table(after: dict, before: dict | None) -> str:
    runs = [("before", before), ("after", after)] if before else [("", after)]
    lines = [
        "| | samples | covey samples/s | raw group samples/s | covey / raw time | submitter peak MiB (covey / raw) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, f in runs:
        n, covey, raw = f["samples"], f["covey"], f["raw"]
        lines.append(
            f"| {label} | {n:,} | {n / covey['seconds']:.1f} | {n / raw['seconds']:.1f} "
            f"| {covey['seconds'] / raw['seconds']:.2f}× | {covey['peak_mib']} / {raw['peak_mib']} |"
        )
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    return f"""## Sweeps (`bench/sweep.py`)

It runs N arithmetic samples (`single` on the zero-latency `sim` model, scored)
as a `covey sweep` with `--max-in-flight {after["max_in_flight"]}` on a one-process `covey worker` with
{after["concurrency"]} thread slots, then the same N tasks as one raw Celery `group` on a worker of
`bench/raw_tree.py` with the same slots, and reports samples per second and the
submitter's peak memory (its resident set). The covey side does everything a
sweep does per sample: validation, a ledger scope charged by every job, a Redis
claim per unit, the bounded window polled in batches, a scored line streamed to
`results.jsonl`; the raw side only sends and collects. The covey sweep scored
{after["covey"]["accuracy"]:.0%} and spent {after["covey"]["tokens"]:,} tokens under its scope.

{table(after, before)}
"""


if __name__ == "__main__":
    main()
