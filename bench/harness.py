"""What every benchmark here starts: a private redis-server and worker subprocesses.

A benchmark measures the covey tree it is run from (``ROOT``): its workers get
``PYTHONPATH=ROOT``, so ``bench/all.py --before REV`` can run the same scripts in
a worktree of an older commit and compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/x.py` puts bench/, not the root, on the path

import redis

from covey.client import Client
from covey.config.settings import Settings
from tests.processes import children
from tests.redis_server import RedisServer

__all__ = [
    "ROOT",
    "RedisServer",
    "Worker",
    "children",
    "interleaved",
    "times_table",
    "cpu_seconds",
    "interruptible",
    "private_redis",
    "report",
    "sim_worker",
    "start_redis",
]


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far (Linux ``/proc``), its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_redis(server: RedisServer) -> None:
    """A private redis-server that ignores the terminal's Ctrl-C.

    Ctrl-C goes to the whole foreground process group; a redis-server that died
    with it would leave the workers retrying their connections instead of shutting
    down. A child inherits a blocked signal, and redis-server never unblocks it.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        server.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def private_redis(stack: ExitStack) -> tuple[RedisServer, redis.Redis]:
    """A private redis-server and a client of it, both stopped as ``stack`` unwinds."""
    server = RedisServer()
    stack.callback(server.stop)
    start_redis(server)
    client = redis.Redis.from_url(server.url)
    stack.callback(client.close)
    return server, client


class Worker:
    """A worker subprocess in its own session: Ctrl-C reaches only this script, which stops it.

    ``env`` adds ``COVEY_*`` settings (the rest of the caller's are dropped), or
    replaces ``PYTHONPATH`` (the tree measured first on it). A
    ``covey worker`` may run a process per core (``name-1@host``, ...): ready is
    when any of them answers.
    """

    def __init__(
        self, name: str, argv: list[str], redis_url: str, queue: str, logs: Path, env: dict[str, str] | None = None
    ) -> None:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
        environ.update(COVEY_REDIS_URL=redis_url, COVEY_QUEUE=queue, COVEY_MODEL="sim", PYTHONPATH=str(ROOT))
        environ.update(env or {})
        self.name, self.log = name, logs / f"{name}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                argv, env=environ, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def answers(self, app) -> bool:
        base, _, host = self.name.partition("@")
        names = {self.name} | {f"{base}-{i}@{host}" for i in range(1, (os.cpu_count() or 1) + 1)}
        return any(name in names for reply in app.control.ping(timeout=0.5) for name in reply)

    def wait_ready(self, app, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log.read_text()[-2000:]}")
            if self.answers(app):
                return
        raise RuntimeError(f"{self.name} did not answer a ping in {seconds}s")

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.terminate()  # a warm shutdown
        try:
            self.proc.wait(timeout=20)
        finally:  # timed out, or interrupted while waiting: it must not outlive Redis
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def sim_worker(
    stack: ExitStack, name: str, logs: Path, slots: int, latency_ms: int, env: dict[str, str] | None = None
) -> Client:
    """A private redis-server and one ``covey worker --pool threads --concurrency
    slots`` process on it (``env``: more ``COVEY_*`` settings), each ``sim`` model
    call ``latency_ms`` long, ready to take jobs: a client of it. All stopped as
    ``stack`` unwinds."""
    server, _ = private_redis(stack)
    client = Client(Settings(redis_url=server.url))
    stack.callback(client.close)
    worker = Worker(
        name,
        [sys.executable, "-m", "covey", "worker", "--pool", "threads", "--concurrency", str(slots)]
        + ["--processes", "1", "--hostname", name, "--loglevel", "warning"],
        server.url,
        "covey",
        logs,
        env={"COVEY_SIM_LATENCY_MS": str(latency_ms), **(env or {})},
    )
    stack.callback(worker.stop)
    worker.wait_ready(client.app)
    return client


def report(
    measure: Callable[[Path], dict],
    show: Callable[[dict], str],
    json_path: Path | None,
    keep_logs: Callable[[dict], bool] = lambda figures: False,
) -> None:
    """A benchmark's run: ``measure`` with a folder for its workers' logs (kept when it
    fails, or when ``keep_logs`` says so), then its table, and its figures as JSON."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` cleans up like Ctrl-C
    logs = Path(tempfile.mkdtemp(prefix="covey-bench-"))
    try:
        figures = measure(logs)
    except Exception:
        print(f"worker logs kept in {logs}", file=sys.stderr)
        raise
    except BaseException:  # Ctrl-C or kill: nothing to look into
        shutil.rmtree(logs)
        raise
    if keep_logs(figures):
        print(f"worker logs kept in {logs}", file=sys.stderr)
    else:
        shutil.rmtree(logs)
    print(show(figures))
    if json_path:
        json_path.write_text(json.dumps(figures, indent=2) + "\n")


def interruptible(main: Callable[[], None]) -> None:
    """Run ``main``; on Ctrl-C, exit 130 at once. Every process it started is stopped by
    then; the interpreter's finalizers are skipped, where an interrupted AsyncResult
    would spend ~20 s retrying the stopped Redis."""
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.stdout.flush()
        os._exit(130)


def interleaved(
    cases: dict[str, Callable[[], object]], runs: int, rounds: int, calls_a_run: int = 1
) -> dict[str, float]:
    """Microseconds per call of each case: the median of ``rounds`` rounds after a
    warm-up one, each round running every case ``runs`` times (``calls_a_run`` calls
    each) in turn, forwards and backwards alternately."""
    samples: dict[str, list[float]] = {key: [] for key in cases}
    for round_ in range(rounds + 1):  # round 0 warms up
        for key, once in list(cases.items())[:: 1 if round_ % 2 else -1]:
            start = time.perf_counter()
            for _ in range(runs):
                once()
            if round_:
                samples[key].append((time.perf_counter() - start) / (calls_a_run * runs) * 1e6)
        print(f"round {round_}/{rounds}", file=sys.stderr)
    return {key: statistics.median(values) for key, values in samples.items()}


def times_table(after: dict, before: dict | None, rows: dict[str, str], head: str, digits: int) -> str:
    """Microseconds per call of each of ``rows`` (``after``'s ``<key>_us``, shown to
    ``digits`` places) and its multiple of the ``sdk`` row's, under ``head``; with
    ``before``, an older commit's figure beside (– for a row it could not time)."""
    sdk = after["sdk_us"]
    lines = [head + (" before (µs) |" if before else ""), "|---|---:|---:|" + ("---:|" if before else "")]
    for key, label in rows.items():
        line = f"| {label} | {after[f'{key}_us']:,.{digits}f} | {after[f'{key}_us'] / sdk:.2f}× |"
        if before is not None:
            line += f" {before[f'{key}_us']:,.{digits}f} |" if f"{key}_us" in before else " – |"
        lines.append(line)
    return "\n".join(lines)


def calls_main(doc: str, calls: int, run_all: Callable[[int], dict], table: Callable[[dict, None], str]) -> None:
    """The command line of a benchmark that times ``calls`` calls a row: ``--calls N``
    and ``--json PATH``, described by the first line of its ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--calls", type=int, default=calls, help=f"calls per row and round (default {calls})")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(lambda logs: run_all(args.calls), lambda figures: table(figures, None), args.json)
