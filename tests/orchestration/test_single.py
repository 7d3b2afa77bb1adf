"""single: one call, no tools, the reply (and its parsed JSON) is the answer."""

from __future__ import annotations

import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import single
from covey.orchestration.actions import CallModel, Finish, ToolResults
from covey.spec import AgentSpec
from covey.status import AgentStatus
from tests.orchestration.checkpointing import resumed

CTX = RunContext(job_id="j", agent_id="root-sub-1", budget=Budget())
SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}


def test_it_asks_once_with_no_tools_and_the_schema():
    spec = AgentSpec(task="score this", role="judge", strategy="single", options={"schema": SCHEMA})
    action = single.start(spec, CTX)
    assert isinstance(action, CallModel)
    assert action.tools == [] and action.schema == SCHEMA
    assert action.messages[-1] == {"role": "user", "content": "score this"}


def test_the_reply_is_the_answer_and_its_json_the_data():
    spec = AgentSpec(task="score this", strategy="single", options={"schema": SCHEMA})
    reply = ModelReply(content='{"score": 0.9}', parsed={"score": 0.9})
    done = resumed(single, spec, CTX, single.start(spec, CTX).state, reply)
    assert isinstance(done, Finish)
    assert (done.status, done.output, done.data) == (AgentStatus.COMPLETED, '{"score": 0.9}', {"score": 0.9})


def test_without_a_schema_there_is_no_data():
    spec = AgentSpec(task="propose", strategy="single")
    assert single.start(spec, CTX).schema is None
    assert resumed(single, spec, CTX, single.State(), ModelReply(content="a plan")).data is None


def test_it_cannot_resume_from_anything_but_a_reply():
    with pytest.raises(TypeError):
        single.resume(AgentSpec(task="x", strategy="single"), CTX, single.State(), ToolResults({}))


def test_the_schema_is_sent_under_its_name():
    spec = AgentSpec(task="x", strategy="single", options={"schema": SCHEMA, "schema_name": "proposal"})
    assert single.start(spec, CTX).schema_name == "proposal"
    assert single.start(AgentSpec(task="x", strategy="single"), CTX).schema_name == "answer"
    with pytest.raises(ValueError, match="options.schema_name"):
        AgentSpec(task="x", strategy="single", options={"schema_name": "no spaces"})
