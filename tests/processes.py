"""What a test or a benchmark reads of the processes it started (Linux ``/proc``)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """The child processes of ``pid``: a ``covey worker``'s one per core."""
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in found]
