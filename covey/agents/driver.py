"""Run the SDK's ``Runner`` once, to its end or to where it parks (``covey.agents.replay``).

A strategy is a plain function the worker calls in its own thread; the SDK is
async. The run gets an event loop of its own: in this thread when none runs here
(a prefork or threads pool), else in a helper thread (a pool whose thread already
runs a loop). The run never waits on I/O (every call is answered from the journal
or parks), so it costs CPU alone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from dataclasses import dataclass
from typing import Any

from agents import Agent, RunConfig, Runner

from covey.agents import replay
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
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_run(agent, task, session, max_turns))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="covey-agent") as pool:
        return pool.submit(asyncio.run, _run(agent, task, session, max_turns)).result()


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
