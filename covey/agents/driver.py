"""Run the SDK's ``Runner`` once, to its end or to where it parks (``covey.agents.replay``).

The run never waits on I/O (every call is answered from the journal or parks),
so it costs CPU alone; ``covey.agents.loops`` gives it a loop of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.tracing import set_trace_provider, setup
from agents.tracing.provider import DefaultTraceProvider

from covey.agents import loops, replay
from covey.agents.replay import CoveyModel, CoveyProvider, Session

WORKFLOW = "covey agent"  # the SDK's name for the run; its own tracing is off (covey traces the calls)


@dataclass(frozen=True)
class Done:
    output: Any  # the SDK's final_output, of the last agent's output type


@dataclass(frozen=True)
class Raised:
    """The SDK ended the run with an exception (max turns, a guardrail, a model behaviour error)."""

    error: BaseException


def run(agent: Agent[Any], task: str, session: Session, max_turns: int) -> Done | Raised | None:
    """Run ``agent`` on ``task`` over ``session``: its end, or None when it parked
    (``session.request`` or ``session.diverged`` says where)."""
    _quiet_tracing()
    return loops.run(lambda: _run(agent, task, session, max_turns))


def _quiet_tracing() -> None:
    """Give the SDK a trace provider with no processor, unless the process set one.
    A run's first trace builds the SDK's default one, disabled or not: an exporter
    to OpenAI with an HTTP client and a thread, whose imports fail under gevent.
    covey runs agents with the SDK's tracing off (it traces the calls itself)."""
    if setup.GLOBAL_TRACE_PROVIDER is None:
        set_trace_provider(DefaultTraceProvider())


async def _run(agent: Agent[Any], task: str, session: Session, max_turns: int) -> Done | Raised | None:
    config = RunConfig(
        model=CoveyModel(session),
        model_provider=CoveyProvider(session),
        tracing_disabled=True,
        workflow_name=WORKFLOW,
    )
    token = replay.current.set(session)
    try:
        running = asyncio.ensure_future(Runner.run(agent, task, run_config=config, max_turns=max_turns))
    finally:
        replay.current.reset(token)  # the task took a copy of the context with the session in it
    parked = asyncio.ensure_future(session.parked.wait())
    await asyncio.wait([running, parked], return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        running.cancel()
        with contextlib.suppress(BaseException):  # whatever the SDK makes of its cancel, the run is over
            await running
        return None
    parked.cancel()
    if session.parked.is_set():  # parked and ended at once: the park is what counts
        return None
    error = running.exception()
    return Done(running.result().final_output) if error is None else Raised(error)
