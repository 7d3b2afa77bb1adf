"""Run the Agents SDK's ``Runner`` once, to its end or to where it parks (``covey.agents.session``).

The run never waits on I/O (every call is answered from the journal or parks),
so it costs CPU alone; ``covey.agents.loops`` gives it a loop of its own.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, RunConfig, Runner
from agents.tracing import set_trace_provider, setup
from agents.tracing.provider import DefaultTraceProvider

from covey.agents import loops, sdk_tools, session
from covey.agents.replay import CoveyModel, CoveyProvider
from covey.agents.session import Done, Raised, Session

WORKFLOW = "covey agent"  # the SDK's name for the run; its own tracing is off (covey traces the calls)


def run(
    agent: Agent[Any], task: str, journal: Session, max_turns: int, offered: list[dict[str, Any]]
) -> Done | Raised | None:
    """Run ``agent`` on ``task`` over ``session``, with covey's tools ``offered`` (function
    schemas) beside its own: its end, or None when it parked (``session.request`` or
    ``session.diverged`` says where)."""
    _quiet_tracing()
    return loops.run(lambda: _run(_with(agent, journal, offered), task, journal, max_turns))


def _with(agent: Agent[Any], journal: Session, offered: list[dict[str, Any]]) -> Agent[Any]:
    """``agent`` with covey's tools added, whose calls covey runs; a tool of the agent's
    own keeps its name (the agent declared it)."""
    own = {getattr(t, "name", None) for t in agent.tools}
    added = sdk_tools.covey_tools([f for f in offered if f["function"]["name"] not in own])
    if not added:
        return agent
    journal.covey_runs |= frozenset(map(id, added))
    return agent.clone(tools=[*agent.tools, *added])


def _quiet_tracing() -> None:
    """Give the SDK a trace provider with no processor, unless the process set one.
    A run's first trace builds the SDK's default one, disabled or not: an exporter
    to OpenAI with an HTTP client and a thread, whose imports fail under gevent.
    covey runs agents with the SDK's tracing off (it traces the calls itself)."""
    if setup.GLOBAL_TRACE_PROVIDER is None:
        set_trace_provider(DefaultTraceProvider())


async def _run(agent: Agent[Any], task: str, journal: Session, max_turns: int) -> Done | Raised | None:
    config = RunConfig(
        model=CoveyModel(journal),
        model_provider=CoveyProvider(journal),
        tracing_disabled=True,
        workflow_name=WORKFLOW,
    )
    ended = await session.until_parked(journal, Runner.run(agent, task, run_config=config, max_turns=max_turns))
    return Done(ended.final_output) if not isinstance(ended, Raised | None) else ended
