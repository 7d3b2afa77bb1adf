"""The ``agent`` strategy over the real Agents SDK, fed the outcomes a worker would give it.

Each step replays the SDK's run from its checkpointed journal (``resumed`` loads
the state back from the checkpoint format first), so these are the SDK's own
requests and its own handling of handoffs and output types.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from covey.agents import strategy
from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply, ToolCall
from covey.orchestration.actions import CallModel, ChildResults, Finish, RunTools, Spawn, ToolResults
from covey.results import AgentResult
from covey.spec import AgentSpec
from covey.status import AgentStatus, CauseKind
from tests.orchestration.checkpointing import resumed

TRIAGE = "covey_example_agents.triage:triage"
CTX = RunContext(job_id="j", agent_id="root", budget=Budget())


def spec(agent: str = TRIAGE, task: str = "Refund order A1", **fields) -> AgentSpec:
    return AgentSpec(task=task, agent=agent, **fields)


def calling(*calls: tuple[str, str, str]) -> ModelReply:
    return ModelReply(content=None, tool_calls=[ToolCall(*c) for c in calls], finish_reason="tool_calls")


def names(action: CallModel) -> list[str]:
    return [f["function"]["name"] for f in action.functions]


def test_a_model_call_is_the_sdks_request_with_its_tools_and_handoffs_offered_beside_no_covey_tool():
    action = strategy.start(spec(), CTX)
    assert isinstance(action, CallModel)
    assert action.messages[0]["content"].startswith("You are a support desk.")
    assert action.messages[1:] == [{"role": "user", "content": "Refund order A1"}]
    assert action.tools == [] and names(action) == ["lookup_order", "ask_policy", "translate", "transfer_to_billing"]
    assert action.key and action.state.run_by_covey == ["lookup_order"]  # a handoff is the SDK's to take
    assert action.state.as_children == ["ask_policy", "translate"]


def test_a_function_tool_call_runs_through_covey_and_its_result_reaches_the_next_request():
    s = spec()
    asked = strategy.start(s, CTX)
    ran = resumed(strategy, s, CTX, asked.state, calling(("c1", "lookup_order", '{"order_id": "A1"}')))
    assert isinstance(ran, RunTools) and ran.calls == [ToolCall("c1", "lookup_order", '{"order_id": "A1"}')]
    again = resumed(strategy, s, CTX, ran.state, ToolResults({"c1": "shipped on Monday"}))
    assert isinstance(again, CallModel)
    assert again.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "shipped on Monday"}
    assert again.key != asked.key


def test_a_handoff_moves_the_run_to_the_other_agent_with_its_own_instructions_and_tools():
    s = spec()
    asked = strategy.start(s, CTX)
    handed = resumed(strategy, s, CTX, asked.state, calling(("h1", "transfer_to_billing", "{}")))
    assert isinstance(handed, CallModel)
    assert handed.messages[0]["content"].startswith("You handle refunds.")
    assert names(handed) == ["refund"]
    done = resumed(strategy, s, CTX, handed.state, ModelReply(content="refund started"))
    assert isinstance(done, Finish) and (done.status, done.output, done.data) == (
        AgentStatus.COMPLETED,
        "refund started",
        None,
    )


def test_as_tool_calls_of_one_reply_become_children_at_once_and_their_answers_the_calls_results():
    s = spec()
    asked = strategy.start(s, CTX)
    reply = calling(
        ("p1", "ask_policy", '{"input": "refund window?"}'),
        ("p2", "translate", '{"input": "thirty days"}'),
        ("c1", "lookup_order", '{"order_id": "A1"}'),
    )
    ran = resumed(strategy, s, CTX, asked.state, reply)
    assert isinstance(ran, RunTools) and [c.id for c in ran.calls] == ["c1"]  # the reply's own tool first
    spawned = resumed(strategy, s, CTX, ran.state, ToolResults({"c1": "shipped"}))
    assert isinstance(spawned, Spawn) and spawned.join == "all"
    assert [(c.task, c.role, c.agent, c.options["tool"], c.key) for c in spawned.children] == [
        ("refund window?", "ask_policy", TRIAGE, "ask_policy", "p1"),
        ("thirty days", "translate", TRIAGE, "translate", "p2"),
    ]
    refused = child_result(None, status="budget_exceeded", error="no tokens left", role="translate")
    answers = [child_result("30 days"), refused]
    again = resumed(strategy, s, CTX, spawned.state, ChildResults(answers, ["p1", "p2"]))
    assert isinstance(again, CallModel)
    said = {m["tool_call_id"]: m["content"] for m in again.messages if m["role"] == "tool"}
    assert said == {
        "p1": "30 days",
        "p2": "error: agent translate ended budget_exceeded: no tokens left",
        "c1": "shipped",
    }


def test_a_child_runs_the_agent_behind_its_as_tool_tool_and_a_tool_it_lacks_is_refused():
    child = strategy.start(spec(task="refund window?", options={"tool": "ask_policy"}), CTX)
    assert isinstance(child, CallModel) and child.messages[0]["content"].startswith("You know the shop's rules")
    assert child.functions == []
    gone = strategy.start(spec(options={"tool": "nope"}), CTX)
    assert isinstance(gone, Finish) and gone.cause.kind is CauseKind.INVALID_SPEC
    assert "has no as_tool agent named 'nope'" in gone.error


def child_result(output, status="completed", error=None, role="ask_policy") -> AgentResult:
    return AgentResult(status=status, job_id="j", agent_id="root-sub-1", role=role, output=output, error=error)


@pytest.mark.parametrize("agent", [TRIAGE, "covey_example_agents.orders:orders"])
def test_a_tools_images_follow_all_its_replys_results_in_every_later_call_and_leave_the_key_alone(agent):
    s, ctx = spec(agent, tools=["calc*"]), CTX.model_copy(update={"allow": ["calc*"]})
    asked = strategy.start(s, ctx)
    reply = calling(("c1", "calculator", '{"expression": "2 + 3"}'), ("c2", "lookup_order", '{"order_id": "A1"}'))
    ran = resumed(strategy, s, ctx, asked.state, reply)
    results = {"c1": "5\n[image: https://x/c.png]", "c2": "shipped"}
    shown = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/c.png"}}]}
    plain = resumed(strategy, s, ctx, ran.state, ToolResults(results))
    again = resumed(strategy, s, ctx, ran.state, ToolResults(results, shown=shown))
    assert isinstance(again, CallModel) and again.key == plain.key  # the framework asked for the same
    assert again.messages == [*plain.messages, shown]
    later = resumed(strategy, s, ctx, again.state, calling(("c3", "calculator", '{"expression": "1"}')))
    last = resumed(strategy, s, ctx, later.state, ToolResults({"c3": "1"}))
    assert isinstance(last, CallModel)
    assert [m["role"] for m in last.messages[-5:]] == ["tool", "tool", "user", "assistant", "tool"]
    assert last.messages[-3] == shown


def test_a_typed_output_is_asked_for_by_its_schema_and_finishes_as_json_data():
    s = spec("covey_example_agents.triage:summary")
    asked = strategy.start(s, CTX)
    assert asked.schema["properties"].keys() == {"order_id", "status"} and asked.schema_name == "final_output"
    answer = {"order_id": "A1", "status": "shipped"}
    done = resumed(strategy, s, CTX, asked.state, ModelReply(content=json.dumps(answer)))
    assert isinstance(done, Finish) and done.data == answer and json.loads(done.output) == answer


def test_a_replay_asking_for_another_request_than_the_recorded_one_fails_nondeterministic_naming_it():
    s = spec()
    asked = strategy.start(s, CTX)
    ran = strategy.resume(s, CTX, asked.state, calling(("c1", "lookup_order", '{"order_id": "A1"}')))
    ran.state.replies[0].key = "recorded-for-another-request"
    done = strategy.resume(s, CTX, ran.state, ToolResults({"c1": "shipped"}))
    assert isinstance(done, Finish) and done.status is AgentStatus.FAILED
    assert (done.cause.kind, done.cause.call) == (CauseKind.NONDETERMINISTIC, "model call 1")
    assert "another path on replay" in done.error


def test_a_tool_call_with_no_recorded_result_fails_nondeterministic_naming_the_call():
    s = spec()
    asked = strategy.start(s, CTX)
    ran = strategy.resume(s, CTX, asked.state, calling(("c1", "lookup_order", '{"order_id": "A1"}')))
    done = strategy.resume(s, CTX, ran.state, ToolResults({"other": "x"}))
    assert isinstance(done, Finish)
    assert (done.cause.kind, done.cause.call) == (CauseKind.NONDETERMINISTIC, "tool call lookup_order (c1)")


def test_the_sdks_own_end_of_a_run_is_a_failure_with_a_cause():
    s = spec(options={"max_turns": 1})
    asked = strategy.start(s, CTX)
    ran = strategy.resume(s, CTX, asked.state, calling(("c1", "lookup_order", '{"order_id": "A1"}')))
    done = strategy.resume(s, CTX, ran.state, ToolResults({"c1": "shipped"}))
    assert isinstance(done, Finish) and done.status is AgentStatus.FAILED
    assert done.cause.kind is CauseKind.GAVE_UP and done.error.startswith("MaxTurnsExceeded")


@pytest.mark.parametrize(
    "path, said",
    [
        ("no_such_module_anywhere:agent", "cannot import module 'no_such_module_anywhere'"),
        ("tests.agents.sdk_agents:missing", "has no 'missing'"),
        ("tests.agents.sdk_agents:not_an_agent", "is a str, not an Agents SDK or pydantic-ai Agent"),
    ],
)
def test_an_agent_the_worker_cannot_load_fails_invalid_spec_naming_the_path(path, said):
    done = strategy.start(spec(path), CTX)
    assert isinstance(done, Finish) and done.cause.kind is CauseKind.INVALID_SPEC
    assert path in done.error and said in done.error


def test_a_step_runs_the_sdk_where_an_event_loop_already_runs_in_the_thread():
    async def inside_a_loop():
        return strategy.start(spec(), CTX)

    assert isinstance(asyncio.run(inside_a_loop()), CallModel)


@pytest.mark.parametrize(
    ("agent", "offered"),
    [
        (TRIAGE, ["lookup_order", "ask_policy", "translate", "calculator", "transfer_to_billing"]),
        ("covey_example_agents.orders:orders", ["lookup_order", "calculator", "final_result"]),
    ],
)
def test_covey_tools_a_job_names_are_offered_beside_the_agents_own_and_replayed_from_their_records(agent, offered):
    """A job naming none offers the agent's own alone (the tests above); naming covey's,
    they join the agent's, covey runs their calls and the run reads the results kept."""
    s, ctx = spec(agent, tools=["calc*"]), CTX.model_copy(update={"allow": ["calc*"]})
    asked = strategy.start(s, ctx)
    assert isinstance(asked, CallModel) and asked.tools == [] and names(asked) == offered
    assert asked.state.run_by_covey == ["lookup_order", "calculator"]
    ran = resumed(strategy, s, ctx, asked.state, calling(("c1", "calculator", '{"expression": "2 + 3"}')))
    assert isinstance(ran, RunTools) and [c.name for c in ran.calls] == ["calculator"]
    again = resumed(strategy, s, ctx, ran.state, ToolResults({"c1": "5"}))
    assert isinstance(again, CallModel) and again.state.replies[0].key == asked.key  # the first call replayed
    assert again.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
