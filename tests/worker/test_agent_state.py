"""The checkpoint format: an agent's state round-trips, and anything else is refused by cause."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.orchestration import plan_execute, react
from covey.spec import AgentSpec
from covey.status import Wait
from covey.worker.agent_state import (
    CHECKPOINT_FORMAT,
    AgentState,
    PendingChild,
    Phase,
    UnreadableCheckpoint,
    dump_checkpoint,
    load_checkpoint,
)

CTX = RunContext(job_id="j", agent_id="root", budget=Budget())
SPEC = AgentSpec(task="What is 6 * 7?")


def agent(spec: AgentSpec = SPEC) -> AgentState:
    state = react.start(spec, CTX).state
    return AgentState(
        ctx=CTX, spec=spec, strategy_state=state, started_at=datetime.fromisoformat("2025-01-01T00:00:00+00:00")
    )


def test_a_checkpoint_names_its_format_and_strategy_and_loads_back_typed():
    saved = json.loads(dump_checkpoint(agent()))
    assert (saved["format"], saved["strategy"], saved["state"]["phase"]) == (CHECKPOINT_FORMAT, "react", "reply")
    loaded = load_checkpoint(dump_checkpoint(agent()))
    assert loaded == agent() and isinstance(loaded.strategy_state, react.State)


@pytest.mark.parametrize("phase", list(Phase))
def test_an_agent_s_phase_round_trips_through_its_checkpoint(phase):
    waiting = agent().model_copy(update={"phase": phase})
    saved = json.loads(dump_checkpoint(waiting))
    assert saved["agent"]["phase"] == phase.value
    assert load_checkpoint(json.dumps(saved)).phase is phase


def refusal(text: str) -> UnreadableCheckpoint:
    with pytest.raises(UnreadableCheckpoint) as caught:
        load_checkpoint(text)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("checkpoint refused: ")
    return caught.value


def test_a_checkpoint_of_the_old_unversioned_format_is_refused():
    old = agent().model_dump(mode="json", exclude={"strategy_state"})
    old["strategy"] = {"messages": [], "tools": [], "spawns": []}  # format 1: the state a bare dict in the agent's
    error = refusal(json.dumps(old))
    assert error.cause == "format"
    assert str(error) == "checkpoint refused: written with no format version (format 1); this worker reads format 3"


def test_a_checkpoint_of_another_format_is_refused():
    saved = json.loads(dump_checkpoint(agent()))
    error = refusal(json.dumps({**saved, "format": 4}))
    assert error.cause == "format" and "of format 4" in str(error)


def format_2(**fields) -> str:
    """A checkpoint as the previous release wrote it: format 2, its agent without a phase."""
    saved = json.loads(dump_checkpoint(agent().model_copy(update=fields)))
    del saved["agent"]["phase"]
    return json.dumps({**saved, "format": 2})


CHILD = PendingChild(agent_id="root-sub-1", key="k")
WINDOW = Wait(reason="tenant:a tokens per minute", until=datetime.fromisoformat("2025-01-01T00:01:00+00:00"))


@pytest.mark.parametrize(
    ("fields", "phase"),
    [
        ({"next_action": {"kind": "call_model"}}, Phase.PAUSED),  # a proceed took it up
        (
            {"next_action": {"kind": "call_model"}, "waiting_for": WINDOW},
            Phase.AWAITING_SLOT,
        ),
        ({"pending": [CHILD]}, Phase.AWAITING_CHILDREN),  # a resume took it up
        ({}, Phase.RUNNING),  # neither did
    ],
)
def test_a_checkpoint_of_the_previous_format_is_read_in_the_phase_its_release_told(fields, phase):
    loaded = load_checkpoint(format_2(**fields))
    assert loaded.phase is phase
    assert loaded.model_dump(exclude={"phase"}) == agent().model_copy(update=fields).model_dump(exclude={"phase"})


def test_a_state_of_another_strategy_is_refused_not_misread():
    saved = json.loads(dump_checkpoint(agent()))
    planner = plan_execute.start(AgentSpec(task="x", strategy="plan_execute"), CTX).state
    error = refusal(json.dumps({**saved, "state": planner.model_dump(mode="json")}))
    assert error.cause == "strategy" and "its state is not one of strategy 'react'" in str(error)
    error = refusal(json.dumps({**saved, "strategy": "single", "state": {"phase": "reply"}}))
    assert error.cause == "strategy"
    assert str(error) == "checkpoint refused: its state is of strategy 'single', its agent runs 'react'"
    assert refusal(json.dumps({**saved, "strategy": "telepathy"})).cause == "strategy"


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"format": CHECKPOINT_FORMAT, "strategy": "react", "state": {"messages": [], "tools": []}}),
    ],
)
def test_an_unparseable_checkpoint_is_refused(text):
    assert refusal(text).cause == "unparseable"
