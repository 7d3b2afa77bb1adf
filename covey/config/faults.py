"""Faults the tests arm: kill the worker process at an exact named point.

``COVEY_FAULT`` names points, comma-separated, each ``<point>:kill`` or
``<point>:kill:<n>`` (the n-th time the point is passed, from 1), read once when
the worker starts. A test that kills a worker at a point, instead of racing a
sleep, hits the same moment every run. Unset, ``at`` costs a set lookup.

Points: ``after_checkpoint`` (a step saved its checkpoint and outbox, sent
nothing), ``after_send`` (it sent its messages, not yet acknowledged its own),
``after_finish`` (an agent's final node is written, its parent's resume not yet
sent), ``after_return`` (a task returned and its result is stored, its message
not yet acknowledged), ``after_pop`` (the broker's pop returned a message that is
not yet in its unacknowledged set), ``after_tool`` (a tool call returned and its
result is recorded, the step not yet acknowledged).
"""

from __future__ import annotations

import os
import signal

_armed: dict[str, int] = {}  # point -> passes left before the kill


def arm(spec: str | None) -> None:
    """Arm the points ``spec`` names (``COVEY_FAULT``); ``ValueError`` names a bad one."""
    _armed.clear()
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        point, *rest = part.strip().split(":")
        nth = rest[1] if len(rest) == 2 else "1"
        if rest[:1] != ["kill"] or len(rest) > 2 or not nth.isdigit():
            raise ValueError(f"COVEY_FAULT: {part!r} is not <point>:kill or <point>:kill:<n>")
        _armed[point] = int(nth)


def at(point: str) -> None:
    """Kill this process here if ``point`` is armed and this is its n-th pass."""
    if point not in _armed:
        return
    _armed[point] -= 1
    if _armed[point] == 0:
        os.kill(os.getpid(), signal.SIGKILL)
