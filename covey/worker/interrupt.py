"""A model call cut short when its agent must stop.

The call runs in a thread of its own while the step's thread looks every
``LOOK_SECONDS`` whether the agent must stop: its job cancelled, or it or an
ancestor cancelled by its parent. When it must, the step stops waiting at once:
the call is charged its reservation (it was sent, and may be billed), as a call
that timed out is, and its thread is left to finish with nothing waiting on it
(its reply dropped, its connection closed at the call's own timeout at the
latest). A call that ends first is what it was.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from covey.models.chat import NOT_ANSWERED, ModelError
from covey.results import Usage
from covey.status import Cause, CauseKind
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps

LOOK_SECONDS = 0.5
# Threads made as calls need them and kept for the next ones: handing a call to a
# new thread took 110-125 us here, to a pooled one 35-80 us, beside the 380 us of
# CPU an LLM.call takes (BENCHMARKS.md). An abandoned call keeps its thread until it ends.
_CALLS = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="covey-model-call")

T = TypeVar("T")


def awaited(deps: Deps, state: AgentState, call: Callable[[], T], worst: Usage) -> T:
    """``call()``'s value, or a ``ModelError`` charged ``worst`` (unanswered) once the
    agent must stop while it runs."""
    context = contextvars.copy_context()  # the step's trace span, for the call's
    running = _CALLS.submit(context.run, call)
    ctx = state.ctx
    while True:
        try:
            return running.result(timeout=LOOK_SECONDS)
        except TimeoutError:
            why = deps.cancels.stopped(ctx.job_id, ctx.chain)
            if why is not None:
                cause = Cause(kind=CauseKind.CANCELLED)
                raise ModelError(f"model call abandoned: {why}; {NOT_ANSWERED}", cause, worst, True) from None
