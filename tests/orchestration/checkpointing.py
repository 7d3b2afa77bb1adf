"""A strategy's state as a resumed agent gets it back: through the worker's checkpoint JSON."""

from __future__ import annotations

from datetime import datetime

from covey.worker.agent_state import AgentState, dump_checkpoint, load_checkpoint

STARTED = datetime.fromisoformat("2025-01-01T00:00:00+00:00")


def reloaded(spec, ctx, state):
    """``state`` dumped in an agent's checkpoint and loaded back, as ``covey.resume`` loads it."""
    agent = AgentState(ctx=ctx, spec=spec, strategy_state=state, started_at=STARTED)
    return load_checkpoint(dump_checkpoint(agent)).strategy_state


def resumed(strategy, spec, ctx, state, outcome):
    """``strategy.resume`` from ``state`` reloaded from its checkpoint, checked to act
    exactly as it does from ``state`` itself."""
    loaded = reloaded(spec, ctx, state)
    assert loaded == state
    action = strategy.resume(spec, ctx, loaded, outcome)
    assert action == strategy.resume(spec, ctx, state, outcome)
    return action
