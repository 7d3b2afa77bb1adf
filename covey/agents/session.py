"""One run of an agent of another framework, replayed from its journal up to new ground.

Each step of the ``agent`` strategy runs the agent from the start with a model of
covey's (``covey.agents.replay`` for the Agents SDK, ``covey.agents.pydantic_driver``
for pydantic-ai): the n-th model call it makes is answered from the journal's
n-th reply, once the request is seen to be the one recorded; a request that
differs ends the run (the run took another path: ``nondeterministic``, naming
the call). The first call past the journal is new ground: the run stops there
and hands the request out, for the worker to reserve, call and settle as
covey's ``CallModel``. Tool calls are answered from the journal's results by call id.

Stopping is waiting: the call that reaches new ground parks on an event no one
sets, and the driver cancels the run once something parks. An exception would
do, but the frameworks turn some into text the model reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """One model call of the agent as covey makes it. ``run_by_covey``: names of the
    function tools whose calls covey runs (``RunTools``) as the reply comes;
    ``as_children``: names of the ``as_tool`` agents whose calls become covey
    children; ``key``: the request's digest, that a replay must ask for again."""

    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    schema: dict[str, Any] | None
    run_by_covey: list[str]
    as_children: list[str]
    key: str
    schema_name: str = "final_output"  # what the Agents SDK names its output schema to the model


def digest(messages: list[Any], functions: list[Any], schema: Any) -> str:
    """A request's key: what a replay must ask for again, byte for byte."""
    body = json.dumps([messages, functions, schema], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:24]


# The session of the covey run this task belongs to; None outside one (a tool
# covey wrapped then calls through). The SDK's tasks inherit it.
current: contextvars.ContextVar[Session | None] = contextvars.ContextVar("covey_agent_session", default=None)


@dataclass(frozen=True)
class Recorded:
    """A settled model call as the journal holds it: the request's key and the reply."""

    key: str
    reply: dict[str, Any]


@dataclass(frozen=True)
class Diverged:
    """The run asked for something its journal does not hold in that place."""

    call: str  # which: "model call 3", "tool call lookup (call_ab12)"
    reason: str


@dataclass
class Session:
    """What one replay reads (the journal) and how it ended: parked at new ground
    (``request``) or off the recorded path (``diverged``). ``covey_runs``: ids of
    the tool objects whose calls covey runs; ``covey_spawns``: of the ``as_tool``
    agents whose calls covey runs as children."""

    replies: list[Recorded]
    results: dict[str, str]
    covey_runs: frozenset[int]
    covey_spawns: frozenset[int] = frozenset()
    asked: int = 0
    request: Request | None = None
    diverged: Diverged | None = None
    parked: asyncio.Event = field(default_factory=asyncio.Event)

    async def reply_to(self, request: Request) -> dict[str, Any]:
        """The recorded reply to the run's next call (content and tool calls), or a park."""
        index, self.asked = self.asked, self.asked + 1
        if index >= len(self.replies):
            if self.request is None:
                self.request = request
            return await self._park()
        recorded = self.replies[index]
        if recorded.key != request.key:
            self.diverged = self.diverged or Diverged(
                f"model call {index + 1}",
                f"model call {index + 1} asked for another request than the one recorded: "
                "the agent took another path on replay (its code, or what it read, changed)",
            )
            return await self._park()
        return recorded.reply

    async def tool_result(self, name: str, call_id: str) -> str:
        if call_id in self.results:
            return self.results[call_id]
        self.diverged = self.diverged or Diverged(
            f"tool call {name} ({call_id})", f"tool call {name} ({call_id}) has no recorded result to replay"
        )
        return await self._park()

    async def _park(self) -> Any:
        self.parked.set()
        await asyncio.Event().wait()  # never set: the driver cancels the run
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Done:
    output: Any  # the run's final output, of the agent's output type


@dataclass(frozen=True)
class Raised:
    """The framework ended the run with an exception (max turns, a guardrail, a reply it could not use)."""

    error: BaseException


async def until_parked(journal: Session, run: Coroutine[Any, Any, T]) -> T | Raised | None:
    """What ``run`` returns, run with ``journal`` as the current session: its
    exception as ``Raised``, or None once something parked (the run cancelled)."""
    token = current.set(journal)
    try:
        running = asyncio.ensure_future(run)
    finally:
        current.reset(token)  # the task took a copy of the context with the session in it
    parked = asyncio.ensure_future(journal.parked.wait())
    await asyncio.wait([running, parked], return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        running.cancel()
        with contextlib.suppress(BaseException):  # whatever the framework makes of its cancel, the run is over
            await running
        return None
    parked.cancel()
    if journal.parked.is_set():  # parked and ended at once: the park is what counts
        return None
    error = running.exception()
    return running.result() if error is None else Raised(error)
