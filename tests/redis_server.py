"""A throwaway ``redis-server`` on a free port, owned by the test run that starts it:
covey's own embedded Redis, always on the system's binary."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from covey.cli.embedded import EmbeddedRedis, free_port

__all__ = ["AofRedis", "RedisServer", "free_port", "refusing_port"]


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port held bound and never listened on: a connection to it is
    refused for as long as the block runs, where a port found free may meanwhile be
    taken by another test's redis-server."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


class RedisServer(EmbeddedRedis):
    def __init__(self, password: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed; the integration tests need it")
        super().__init__(binary, password=password)


class AofRedis(RedisServer):
    """Writes every command to its append-only file before answering, so ``halt``
    then ``start`` is a Redis restart on the same port that loses nothing."""

    def persistence(self) -> list[str]:
        return ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
