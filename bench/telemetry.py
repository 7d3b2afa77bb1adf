"""What tracing and metrics add to a worker's CPU per agent, as ratios measured in one run.

Run from the repo root: ``python bench/telemetry.py [--repeats N] [--baseline DIR] [--json PATH]``.

``bench/fanout.py``'s cost tree (4×3, 85 agents, zero-latency ``sim``) runs on
covey workers that differ in one thing each, every one a single process with
4 thread slots on its own queue:

- off: no ``OTEL_*`` variable, no ``--metrics-port`` (what a user gets by default);
- traced: ``OTEL_EXPORTER_OTLP_ENDPOINT`` at an OTLP/HTTP sink on loopback that
  answers 200 (the worker's side of the export is measured, not a receiver's);
- metrics: ``covey worker --metrics-port``;
- baseline, with ``--baseline DIR``: the worker of another covey checkout (say a
  ``git worktree`` of the commit before the hooks), to show what the hooks cost
  when both are off.

Each round runs the tree four times on every worker, in a rotating order, and reads
the worker's CPU (``/proc``) around them, one second after the last result
included, so a batch of spans exported after the job is counted. Medians over the rounds, after
one warm-up round; the machine is shared, so only ratios from the same rounds are
compared.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/telemetry.py` puts bench/, not the root, on the path

from bench.fanout import agents, cpu_seconds, run_covey
from bench.harness import Worker, interruptible, private_redis, report
from covey.client import Client
from covey.config.settings import Settings

TREE = (4, 3)
SLOTS = 4
TREES_PER_ROUND = 4  # 340 agents a reading: a clock tick of CPU (10 ms) is 0.03 ms per agent
SETTLE_SECONDS = 1.0  # after a result: acks, events and a batch of spans (exported every 200 ms here)


class Sink:
    """An OTLP/HTTP endpoint that takes every export and answers 200, counting the requests."""

    def __init__(self) -> None:
        self.requests = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start(stack: ExitStack, name: str, redis_url: str, logs: Path, flags: list[str], env: dict[str, str]) -> tuple:
    """A covey worker ``name`` on its own queue, ready, and its client; ``COVEY_BENCH_TREE``
    in ``env`` runs the worker of that covey checkout instead of this one's."""
    env = dict(env)
    queue = f"bench-telemetry-{name}"
    start_flags = ["worker", "--processes", "1", "--pool", "threads", "--concurrency", str(SLOTS)]
    start_flags += ["--loglevel", "warning", "--hostname", f"{name}@bench", *flags]
    argv = [sys.executable, "-P", "-m", "covey", *start_flags]
    tree = env.pop("COVEY_BENCH_TREE", None)
    if tree is not None:  # another checkout's worker, its path first: -P keeps this tree (the cwd) off it
        argv = [
            sys.executable,
            "-P",
            "-c",
            f"import sys; sys.path.insert(0, {tree!r}); from covey.cli import main; main()",
        ]
        argv += start_flags
    worker = Worker(f"{name}@bench", argv, redis_url, queue, logs, env={"COVEY_WORKER_PROCESSES": "1", **env})
    stack.callback(worker.stop)
    client = Client(Settings(redis_url=redis_url, queue=queue))
    stack.callback(client.close)
    worker.wait_ready(client.app)
    return worker, client


def run_all(repeats: int, baseline: Path | None, logs: Path) -> dict:
    width, depth = TREE
    n = agents(width, depth)
    with ExitStack() as stack:
        server, _ = private_redis(stack)
        sink = Sink()
        stack.callback(sink.close)
        configs = {
            "off": ([], {}),
            "traced": ([], {"OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}),
            "metrics": (["--metrics-port", "0"], {}),
        }
        if not (ROOT / "covey" / "worker" / "telemetry.py").exists():  # an older covey (bench/all.py --before)
            configs = {"off": configs["off"]}
        if baseline is not None:
            configs["baseline"] = ([], {"COVEY_BENCH_TREE": str(baseline.resolve())})
        workers = {name: start(stack, name, server.url, logs, *config) for name, config in configs.items()}
        cpu: dict[str, list[float]] = {name: [] for name in workers}
        order = list(workers)
        for round_ in range(repeats + 1):
            for name in order:
                worker, client = workers[name]
                before = cpu_seconds(worker.proc.pid)
                for _ in range(TREES_PER_ROUND):
                    run_covey(client, width, depth)
                time.sleep(SETTLE_SECONDS)
                if round_:
                    cpu[name].append(1000 * (cpu_seconds(worker.proc.pid) - before) / (n * TREES_PER_ROUND))
            order = order[1:] + order[:1]
            print(f"round {round_}/{repeats}", file=sys.stderr)
        if "traced" in workers and sink.requests == 0:
            raise RuntimeError("the traced worker exported nothing")
    return {
        "tree": list(TREE),
        "repeats": repeats,
        "cpu_ms_per_agent": {k: statistics.median(v) for k, v in cpu.items()},
        "samples": cpu,
    }


def table(figures: dict) -> str:
    """Medians, each beside its rounds' middle half (the noise a difference must clear)."""
    cpu, samples = figures["cpu_ms_per_agent"], figures["samples"]
    lines = [
        "| worker | CPU ms per agent (median) | middle half of the rounds | against off |",
        "|---|---:|---:|---:|",
    ]
    for name, ms in cpu.items():
        q1, _, q3 = statistics.quantiles(samples[name], n=4)
        lines.append(f"| {name} | {ms:.2f} | {q1:.2f}–{q3:.2f} | {100 * (ms / cpu['off'] - 1):+.1f}% |")
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    """The BENCHMARKS.md section; ``before``'s worker (an older covey, measured off) beside."""
    earlier = (
        ""
        if before is None
        else f"""
The commit measured before, its worker as it is (no telemetry to turn on), in its own
rounds of the same run: {before["cpu_ms_per_agent"]["off"]:.2f} ms per agent.
"""
    )
    width, depth = after["tree"]
    return f"""## Tracing and metrics (`bench/telemetry.py`)

What a worker's CPU per agent is with telemetry off (the default), with traces
exported over OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT` at a loopback endpoint that
answers 200), and with `--metrics-port`: `bench/fanout.py`'s {width}×{depth} tree
({agents(width, depth)} agents, zero-latency `sim`) run {TREES_PER_ROUND} times per round on each
worker (one process, {SLOTS} thread slots, each on its own queue), the workers taking
turns in a rotating order, CPU read from `/proc` around each round (one second
after its last result included, so the spans exported after a job count). Medians
of {after["repeats"]} rounds after a warm-up, beside the middle half of the rounds:
the machine is shared, and a difference inside that spread is noise.

{table(after)}
{_baseline if "baseline" in after["cpu_ms_per_agent"] else ""}{earlier}"""


_baseline = """
baseline: the worker of another covey checkout (`--baseline DIR`), in the same rounds.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds, after one warm-up")
    parser.add_argument("--baseline", type=Path, help="another covey checkout whose worker is the baseline")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(lambda logs: run_all(args.repeats, args.baseline, logs), table, args.json)


if __name__ == "__main__":
    interruptible(main)
