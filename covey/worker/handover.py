"""How a step that hands its agent on to the next message ends: it just returns.

A step that fans out (or pauses after a slice) has recorded and sent the message
that goes on with its agent (``covey.store.outbox``). What the sender linked to
the task (``link``, ``link_error``, a chain) belongs to the agent's end, so it
travels on that message (``carried``), and the step's own end does nothing with
it: no result stored (the agent's last task stores one under the same id), no
callback sent (``handed_on``). Returning is cheaper than Celery's ``Ignore``, for
which the tracer builds and formats two tracebacks: a tenth of a worker's CPU per
agent when it was measured.
"""

from __future__ import annotations

from typing import Any

HANDED_ON = "handed on to its next message"


def carried(request: Any) -> dict[str, Any]:
    """The options the next message of this task's agent takes over from it."""
    found = {"link": request.callbacks, "link_error": request.errbacks, "chain": request.chain}
    return {name: value for name, value in found.items() if value}


def handed_on(request: Any) -> str:
    """End the step without a result or callbacks of its own."""
    request.ignore_result = True
    request.callbacks = request.errbacks = request.chain = request.chord = None
    return HANDED_ON
