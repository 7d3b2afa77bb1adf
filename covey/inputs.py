"""Reading what a user points covey at: bounded in size, and checked to be UTF-8.

A task file, standard input, a dataset, a grid, the models and MCP servers files
are read through here. Unbounded, ``--task-file /dev/zero`` grew a process to
9.4 GB in 40 s; undecodable, a file ended in a traceback. Each now fails with one
line naming the file and the bound, or the byte offset of the first byte that is
not UTF-8; every caller turns ``Unreadable`` into its own one-line error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MIB = 1 << 20
MAX_TASK_BYTES = 4 * MIB  # a task from a file or standard input
MAX_LINE_BYTES = 4 * MIB  # one line of a dataset: a sample
MAX_CONFIG_BYTES = 1 * MIB  # a models file, an MCP servers file, a sweep's grid


class Unreadable(ValueError):
    """The input is larger than its bound, or is not UTF-8 text (one line, naming it)."""


def size(limit: int) -> str:
    """``limit`` bytes as a person reads it: ``4 MiB``, ``512 bytes``."""
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def decode(data: bytes, name: str, offset: int = 0) -> str:
    """``data`` as text, or ``Unreadable`` naming the byte offset (from ``offset``,
    where ``data`` starts in ``name``) of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Unreadable(f"{name}: not UTF-8 text: byte 0x{data[e.start]:02x} at offset {offset + e.start}") from None


def read_stream(stream: BinaryIO, name: str, limit: int) -> str:
    """All of ``stream`` as text, reading at most ``limit`` bytes and one more."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise Unreadable(f"{name}: larger than {size(limit)}, the most covey reads of it")
    return decode(data, name)


def read_text(path: Path, name: str, limit: int) -> str:
    """The file at ``path`` as text, bounded as ``read_stream`` (``OSError`` if it cannot be opened)."""
    with path.open("rb") as f:
        return read_stream(f, name, limit)


def lines(path: Path, name: str, limit: int) -> Iterator[tuple[int, str]]:
    """Each line of the file (numbered from 1, with its line end) as text; a line
    longer than ``limit`` bytes is ``Unreadable``, read no further than that."""
    offset = 0
    with path.open("rb") as f:
        for number, data in enumerate(iter(lambda: f.readline(limit + 1), b""), start=1):
            if len(data) > limit and not data.endswith(b"\n"):
                raise Unreadable(f"{name} line {number}: longer than {size(limit)}, the most covey reads of a line")
            yield number, decode(data, name, offset)
            offset += len(data)
