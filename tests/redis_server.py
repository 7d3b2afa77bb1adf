"""A throwaway ``redis-server`` on a free port, owned by the test run that starts it:
covey's own embedded Redis, always on the system's binary."""

from __future__ import annotations

import shutil

from covey.cli.embedded import EmbeddedRedis, free_port

__all__ = ["AofRedis", "RedisServer", "free_port"]


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
