"""A real Redis and a real worker process (threads pool, concurrency 1) for the run."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx2
import pytest
from celery import Celery

from covey.client import Client
from covey.config.settings import Settings
from covey.orchestration import registry
from covey.tools.registry import DEFAULT_TOOLS
from tests.processes import children
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]
_LOGS: list[Path] = []  # the session's directory of worker logs, once made


@pytest.fixture(scope="session", autouse=True)
def _worker_logs():
    """Workers log into one directory of the session's, removed when it ends, so
    a run leaves no file in the system's temporary directory."""
    yield
    for directory in _LOGS:
        shutil.rmtree(directory, ignore_errors=True)


def worker_log(name: str) -> IO[str]:
    """A new log file for one worker process, in the session's log directory."""
    if not _LOGS:
        _LOGS.append(Path(tempfile.mkdtemp(prefix="covey-worker-logs-")))
    return open(_LOGS[0] / f"{name}-{time.time_ns()}.log", "w")


def worker_env(redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update({"COVEY_REDIS_URL": redis_url, "COVEY_MODEL": "sim", "COVEY_MODEL_RETRIES": "2", **extra})
    return env


def default_ctrl_c() -> None:
    """A child's Ctrl-C as a terminal delivers it (a ``preexec_fn``): a test runner's
    process may ignore SIGINT (xdist's workers do), and an ignored signal stays
    ignored across exec, so the child's Python would never raise KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_worker(
    redis_url: str,
    concurrency: int = 1,
    pool: str = "threads",
    processes: int = 1,
    hostname: str | None = None,
    **extra: str,
) -> subprocess.Popen:
    flags = ["--concurrency", str(concurrency), "--pool", pool, "--processes", str(processes), "--loglevel", "info"]
    return start_covey_worker(redis_url, [*flags, *(["--hostname", hostname] if hostname else [])], **extra)


def start_covey_worker(redis_url: str, flags: list[str], **extra: str) -> subprocess.Popen:
    """``covey worker`` with these flags only (none: every default, as a deployment runs it)."""
    log = worker_log("covey-worker")
    proc = subprocess.Popen(
        [sys.executable, "-m", "covey", "worker", *flags],
        env=worker_env(redis_url, **extra),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc.log_path = Path(log.name)  # what the worker wrote, for tests that read its log
    return proc


SERVER_START_SECONDS = 30  # for a server to start and say where it listens, on a loaded machine
UI_SAYS = r"^covey ui on (http://\S+)/jobs "  # covey ui's first line, once it listens: its base URL


def said_address(proc: subprocess.Popen, log: Path, pattern: str, what: str) -> str:
    """The address a server started on port 0 names (``pattern``'s group) in its
    output, written to ``log``, once it listens."""
    deadline = time.monotonic() + SERVER_START_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        said = re.search(pattern, log.read_text(), re.M)
        if said:
            return said.group(1)
        time.sleep(0.05)
    stop_worker(proc)
    said = log.read_text()
    raise RuntimeError(f"{what} did not say where it listens within {SERVER_START_SECONDS}s: {said}")


def start_sim_server(redis_url: str, **extra: str) -> tuple[subprocess.Popen, str]:
    """``covey sim-server`` on a port it picks (``--port 0``: none another process can
    take first), listening; returns it and its base URL."""
    log = worker_log("sim-server")
    server = subprocess.Popen(
        [sys.executable, "-m", "covey", "sim-server", "--port", "0"],
        env=worker_env(redis_url, **extra),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    return server, said_address(server, Path(log.name), r"^sim model on (http://\S+/v1)$", "covey sim-server")


def start_flower(redis_url: str, basic_auth: str, **extra: str) -> tuple[subprocess.Popen, str]:
    """``covey flower --basic-auth`` on a port it picks (``--port 0``), listening;
    returns it and its base URL. Its log, JSON or not, names the port."""
    log = worker_log("covey-flower")
    flower = subprocess.Popen(
        [sys.executable, "-m", "covey", "flower", "--port", "0", "--basic-auth", basic_auth],
        env=worker_env(redis_url, **extra),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return flower, said_address(flower, Path(log.name), r"Visit me at (http://[0-9.]+:[0-9]+)", "covey flower")


SIMHTTP = "simhttp"  # the name a models file gives ``covey sim-server`` in the tests


DOWN_URL = "http://user:hunter2@127.0.0.1:{port}/v1?key=hunter2"  # the ``down`` model's endpoint


def served_over_http(directory: Path, base_url: str, down: int | None = None) -> dict[str, str]:
    """Worker variables serving ``simhttp`` from ``covey sim-server`` at ``base_url``
    through a models file (priced, for cost caps), plus ``nokey``, whose key variable is never set, and with
    ``down`` (a port held refusing: ``tests.redis_server.refusing_port``), a model of
    that name whose endpoint (credentials in its URL) refuses every connection."""
    unreachable = f'\n[models.down]\nbase_url = "{DOWN_URL.format(port=down)}"\napi_key_env = "SIMHTTP_KEY"\n'
    unreachable = "" if down is None else unreachable
    path = directory / "models.toml"
    path.write_text(
        f'[models.{SIMHTTP}]\nbase_url = "{base_url}"\napi_key_env = "SIMHTTP_KEY"\nmodel = "sim"\n'
        "price = { input = 0.15, output = 0.60 }\n\n"
        f'[models.nokey]\nbase_url = "{base_url}"\napi_key_env = "NOKEY_KEY"\n' + unreachable
    )
    return {"COVEY_MODELS": str(path), "SIMHTTP_KEY": "unused"}


def called(task: str) -> list[str]:
    """covey's built-ins and the tools a task's ``[sim:call NAME ...]`` directives
    call: what its spec names, since a job naming none is offered the built-ins alone."""
    return list(dict.fromkeys([*DEFAULT_TOOLS, *re.findall(r"\[sim:call ([A-Za-z0-9_-]+)", task)]))


def calls_reaching(base_url: str) -> int:
    return httpx2.get(base_url.removesuffix("/v1") + "/sim/calls", timeout=5).json()["total"]


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for_worker(client: Client, proc: subprocess.Popen, seconds: float = 60) -> None:
    """Until ``proc``'s own worker answers (a ``covey worker`` of several processes: one
    of them). Any worker answering a ping proved nothing of this one: a module's worker
    on the same Redis answers while a test's second one still starts."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited with {proc.returncode}")
        try:
            ours = {proc.pid, *children(proc.pid)}
        except FileNotFoundError:  # it exited just now: said above, next time round
            continue
        replies = client.app.control.broadcast("stats", reply=True, timeout=0.5)
        if any(isinstance(s, dict) and s.get("pid") in ours for reply in replies for s in reply.values()):
            return
    raise RuntimeError("worker did not answer")


@contextmanager
def own_worker(concurrency: int = 1, **env: str) -> Iterator[tuple[RedisServer, Client]]:
    """A Redis of its own, a worker on it with ``env``, and a client of it."""
    with RedisServer() as server:
        worker = start_worker(server.url, concurrency=concurrency, **env)
        client = Client(Settings(redis_url=server.url))
        try:
            wait_for_worker(client, worker)
            yield server, client
        finally:
            client.close()
            stop_worker(worker)


@contextmanager
def plugin_worker(
    redis_url: str, where: Path, queue: str, strategies: dict[str, str], concurrency: int = 1
) -> Iterator[Client]:
    """A worker on ``queue`` and a client, with ``strategies`` (name -> module)
    installed in ``where`` under the ``covey.strategies`` entry point group, as
    another package would install them."""
    dist = where / "covey_test_strategies-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: covey-test-strategies\nVersion: 0.1\n")
    entries = "".join(f"{name} = {module}\n" for name, module in strategies.items())
    (dist / "entry_points.txt").write_text(f"[covey.strategies]\n{entries}")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(where))
        registry._plugins.cache_clear()
        # A node name of its own: on a shared Redis the session's worker is celery@<host> too,
        # and two nodes of one name overwrite each other's catalog entry.
        flags = [
            "--concurrency",
            str(concurrency),
            "--pool",
            "threads",
            "--processes",
            "1",
            "--hostname",
            f"{queue}@%h",
        ]
        worker = start_covey_worker(redis_url, flags, COVEY_QUEUE=queue, PYTHONPATH=str(where))
        client = Client(Settings(redis_url=redis_url, queue=queue))
        try:
            wait_for_worker(client, worker)
            yield client
        finally:
            client.close()
            stop_worker(worker)
    registry._plugins.cache_clear()
    registry.strategy.cache_clear()


@pytest.fixture(scope="session")
def settings(redis_server) -> Settings:
    return Settings(redis_url=redis_server.url, model="sim")


@pytest.fixture(scope="session")
def worker(redis_server, settings):
    proc = start_worker(redis_server.url)
    client = Client(settings)
    wait_for_worker(client, proc)
    yield proc
    stop_worker(proc)


@pytest.fixture
def client(settings, worker) -> Client:
    c = Client(settings)
    yield c
    c.close()


@pytest.fixture(scope="module")
def bare(redis_server, worker):
    """A Celery client that knows nothing of covey but the broker and the task name."""
    app = Celery("elsewhere", broker=redis_server.url, backend=redis_server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    app.conf.task_default_queue = "covey"
    yield app
    app.close()


@pytest.fixture
def cli(redis_server, worker):
    """Run the real ``covey`` CLI against the test Redis and worker."""

    def run(*args: str, timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "covey", *args],
            env=worker_env(redis_server.url),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            input=stdin,
        )

    return run
