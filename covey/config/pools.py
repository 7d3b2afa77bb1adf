"""The connection pools every covey client of Redis draws from.

redis-py's ``get_connection`` carries a deprecation wrapper that inspects each
call's arguments to warn of ones passed in redis-py 5.2 and before. redis-py
itself and covey pass none, yet the wrapper ran once per round trip: 3% of a
zero-latency sweep's worker time. These pools call the function under it.

Their connections pack each command in one call to hiredis (``OneCallPacker``).
"""

from __future__ import annotations

import inspect
from typing import Any

import hiredis
import redis
from redis._parsers.encoders import Encoder
from redis.connection import PythonRespSerializer

BUFFER_CUTOFF = 6000  # redis-py's: past this many bytes its own packer sends a value as a chunk of its own


class OneCallPacker:
    """Packs a command with one call to hiredis, which encodes str (UTF-8), int,
    float and bytes exactly as redis-py does. redis-py's own packer with hiredis
    first runs every argument through its encoder in a Python generator: covey's
    scripts take a dozen keys and arguments, and that loop was about a tenth of a
    zero-latency sweep's worker time. What hiredis does not take (a command name
    holding a space, such as ``SCRIPT LOAD``; a bytearray or memoryview; a bool or
    None, which redis-py refuses with its ``DataError``) goes to redis-py's packer.
    Stateless, so one serves every connection of a pool."""

    def __init__(self) -> None:
        self._fallback = PythonRespSerializer(BUFFER_CUTOFF, Encoder("utf-8", "strict", False).encode).pack

    def pack(self, *args: Any) -> list[bytes]:
        name = args[0]
        if (" " if isinstance(name, str) else b" ") in name:
            return self._fallback(*args)
        try:
            return [hiredis.pack_command(args)]
        except TypeError:
            return self._fallback(*args)


def packing(connection_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``connection_kwargs`` with covey's packer, where its connections encode text as
    UTF-8, strictly (redis-py's default, and every covey client's)."""
    encoding = (connection_kwargs.get("encoding", "utf-8"), connection_kwargs.get("encoding_errors", "strict"))
    if encoding != ("utf-8", "strict") or "command_packer" in connection_kwargs:
        return connection_kwargs
    return {**connection_kwargs, "command_packer": OneCallPacker()}


class Pool(redis.ConnectionPool):
    """redis-py's pool (a caller beyond its connections is refused)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **packing(kwargs))

    get_connection = inspect.unwrap(redis.ConnectionPool.get_connection)


class BlockingPool(redis.BlockingConnectionPool):
    """redis-py's blocking pool (a caller beyond its connections waits for a free one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **packing(kwargs))

    get_connection = inspect.unwrap(redis.BlockingConnectionPool.get_connection)
