"""A streamed reply's text published as it arrives: ``model.delta`` events, a few a
second (``spec.stream``).

Pieces are gathered and appended together at most every ``FLUSH_SECONDS`` (the
first at once, for the time to a first word), and what is left when the reply
ends, before the settlement writes ``model.finished``. Each delta says where its
text goes in the reply (``offset``, in characters), so a reader joins them in
order. They report no state: a call cut off by a crash and sent again streams
again from offset 0, and a reader keeps the last text at each offset.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from covey.events import EventType, JobEvent
from covey.store.events import EventStream
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps

FLUSH_SECONDS = 0.25


class Deltas:
    """The text of one call's reply, handed over piece by piece (``on_text``)."""

    def __init__(self, deps: Deps, state: AgentState, call_id: str) -> None:
        self._stream, self._ttl = EventStream(deps.redis), deps.settings.job_ttl
        self._job, self._agent, self._call, self._cycle = state.ctx.job_id, state.ctx.agent_id, call_id, state.cycle
        self._pending: list[str] = []
        self._offset = 0
        self._flushed = float("-inf")
        self._closed = False

    def __call__(self, text: str) -> None:
        if self._closed:  # the call was abandoned: what it still reads is no one's
            return
        self._pending.append(text)
        if time.monotonic() - self._flushed >= FLUSH_SECONDS:
            self.flush()

    def close(self) -> None:
        """Append what is left; what the call still hands on after is dropped (it was abandoned)."""
        self.flush()
        self._closed = True

    def flush(self) -> None:
        if not self._pending:
            return
        text = "".join(self._pending)
        delta = JobEvent(
            type=EventType.MODEL_DELTA,
            agent_id=self._agent,
            call_id=self._call,
            cycle=self._cycle,
            offset=self._offset,
            text=text,
        )
        self._stream.add(self._job, delta, self._ttl)
        self._pending, self._offset, self._flushed = [], self._offset + len(text), time.monotonic()


@contextmanager
def published(deps: Deps, state: AgentState, call_id: str) -> Iterator[Callable[[str], None] | None]:
    """What the call hands its reply's text to: the agent's deltas when its spec
    streams (the rest of them appended when the call ends), else None."""
    if not state.spec.stream:
        yield None
        return
    deltas = Deltas(deps, state, call_id)
    try:
        yield deltas
    finally:
        deltas.close()
