import json

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply, ToolCall
from covey.orchestration import react
from covey.orchestration.actions import CallModel, ChildResults, Finish, RunTools, Spawn, ToolResults
from covey.results import AgentResult
from covey.spec import AgentSpec
from covey.status import AgentStatus
from tests.orchestration.checkpointing import resumed

SPEC = AgentSpec(task="do it", role="lead", instructions="be brief")
CTX = RunContext(job_id="j", agent_id="root", budget=Budget())


def reply(*calls, content=None):
    return ModelReply(
        content=content, tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    )


def test_start_asks_the_model_with_system_and_task():
    action = react.start(SPEC, CTX)
    assert isinstance(action, CallModel)
    assert action.messages[0]["role"] == "system" and "lead" in action.messages[0]["content"]
    assert action.messages[1] == {"role": "user", "content": "do it"}


def test_plain_answer_finishes_completed():
    action = resumed(react, SPEC, CTX, react.start(SPEC, CTX).state, ModelReply(content="42"))
    assert isinstance(action, Finish) and action.status is AgentStatus.COMPLETED and action.output == "42"


def test_finish_tool_carries_the_answer():
    state = react.start(SPEC, CTX).state
    action = resumed(react, SPEC, CTX, state, reply(("finish", '{"answer": "yes"}')))
    assert isinstance(action, Finish) and action.output == "yes"


def test_tools_run_then_model_reads_their_results():
    state = react.start(SPEC, CTX).state
    action = resumed(react, SPEC, CTX, state, reply(("calculator", '{"expression": "2+2"}')))
    assert isinstance(action, RunTools) and action.calls[0].name == "calculator"
    action = resumed(react, SPEC, CTX, action.state, ToolResults({"c0": "4"}))
    assert isinstance(action, CallModel)
    assert action.messages[-1] == {"role": "tool", "tool_call_id": "c0", "content": "4"}


def test_spawn_becomes_a_spawn_action_and_children_answer_the_call():
    state = react.start(SPEC, CTX).state
    args = json.dumps({"agents": [{"task": "a"}, {"task": "b", "role": "critic"}]})
    action = resumed(react, SPEC, CTX, state, reply(("spawn_agents", args)))
    assert isinstance(action, Spawn)
    assert [(c.task, c.role) for c in action.children] == [("a", "agent"), ("b", "critic")]
    results = [
        AgentResult(job_id="j", agent_id="x", status=AgentStatus.COMPLETED, output="A", role="agent"),
        AgentResult(job_id="j", agent_id="y", status=AgentStatus.FAILED, error="boom", role="critic"),
    ]
    action = resumed(react, SPEC, CTX, action.state, ChildResults(results))
    assert isinstance(action, CallModel)
    body = json.loads(action.messages[-1]["content"])
    assert [s["status"] for s in body] == ["completed", "failed"]
    assert body[1]["error"] == "boom"
    assert "messages" not in action.messages[-1]["content"]  # summaries, never histories


def test_delegate_answers_with_one_summary():
    state = react.start(SPEC, CTX).state
    action = resumed(react, SPEC, CTX, state, reply(("delegate", '{"task": "check"}')))
    assert isinstance(action, Spawn) and len(action.children) == 1
    done = AgentResult(job_id="j", agent_id="x", status=AgentStatus.COMPLETED, output="ok")
    action = resumed(react, SPEC, CTX, action.state, ChildResults([done]))
    assert json.loads(action.messages[-1]["content"])["output"] == "ok"


def test_each_spawned_child_may_be_given_its_own_timeout():
    state = react.start(SPEC, CTX).state
    args = json.dumps({"agents": [{"task": "a", "timeout": 30}, {"task": "b"}, {"task": "c", "timeout": 2.5}]})
    action = resumed(react, SPEC, CTX, state, reply(("spawn_agents", args)))
    assert isinstance(action, Spawn)
    assert [c.timeout for c in action.children] == [30.0, None, 2.5]
    for bad in (0, -1, "soon", True, 10**9):
        args = json.dumps({"agents": [{"task": "a", "timeout": bad}]})
        answered = resumed(react, SPEC, CTX, react.start(SPEC, CTX).state, reply(("spawn_agents", args)))
        assert isinstance(answered, CallModel), bad
        assert answered.messages[-1]["content"] == "error: 'timeout' must be seconds, more than 0 and at most 604800"


def test_spawn_with_bad_children_is_answered_with_the_error():
    state = react.start(SPEC, CTX).state
    action = resumed(react, SPEC, CTX, state, reply(("spawn_agents", '{"agents": [{"role": "x"}]}')))
    assert isinstance(action, CallModel)
    assert action.messages[-1]["content"].startswith("error: each agent needs")


def test_malformed_arguments_fail_the_agent():
    state = react.start(SPEC, CTX).state
    action = resumed(react, SPEC, CTX, state, reply(("calculator", '{"expression": "1+')))
    assert isinstance(action, Finish) and action.status is AgentStatus.FAILED
    assert "malformed arguments" in action.error and "calculator" in action.error


def test_a_tool_never_offered_is_answered_with_the_tools_it_may_call_and_the_model_asked_again():
    ctx = RunContext(job_id="j", agent_id="root", budget=Budget(), deny=["write_file"])
    state = react.start(SPEC, ctx).state
    assert "write_file" not in state.tools
    action = resumed(react, SPEC, ctx, state, reply(("write_file", '{"path": "a", "content": "b"}')))
    assert isinstance(action, CallModel)
    told = action.messages[-1]
    assert told["role"] == "tool" and told["tool_call_id"] == "c0"
    assert (
        told["content"] == f"error: there is no tool 'write_file'; the tools you may call are: {', '.join(state.tools)}"
    )


def test_the_tools_the_call_offered_are_the_ones_named_when_a_reply_strays():
    """The worker narrows a call's tools (no spawn tool at the depth cap): the reply
    says which it offered, and a call of another is answered, the rest run."""
    state = react.start(SPEC, CTX).state
    strayed = reply(("spawn_agents", '{"agents": []}'), ("calculator", '{"expression": "1+1"}'))
    offered = ModelReply(
        content=None, tool_calls=strayed.tool_calls, finish_reason="tool_calls", offered=("calculator",)
    )
    action = resumed(react, SPEC, CTX, state, offered)
    assert isinstance(action, RunTools) and [c.name for c in action.calls] == ["calculator"]
    assert (
        action.state.messages[-1]["content"]
        == "error: there is no tool 'spawn_agents'; the tools you may call are: calculator"
    )


def test_resume_never_mutates_the_given_state():
    state = react.start(SPEC, CTX).state
    before = state.model_dump_json()
    react.resume(SPEC, CTX, state, reply(("calculator", '{"expression": "1"}')))
    assert state.model_dump_json() == before


def test_a_tools_images_follow_every_result_of_its_reply_spawns_too():
    state = react.start(SPEC, CTX).state
    spawn = json.dumps({"agents": [{"task": "a"}]})
    state.tools.append("chart")  # a tool of the worker's, which this process does not serve
    action = resumed(react, SPEC, CTX, state, reply(("chart", "{}"), ("spawn_agents", spawn)))
    assert isinstance(action, RunTools)
    shown = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/c.png"}}]}
    action = resumed(
        react, SPEC, CTX, action.state, ToolResults({"c0": "drawn\n[image: https://x/c.png]"}, shown=shown)
    )
    assert isinstance(action, Spawn)  # the images wait: a user turn between results would split the reply's
    done = AgentResult(job_id="j", agent_id="x", status=AgentStatus.COMPLETED, output="A", role="agent")
    action = resumed(react, SPEC, CTX, action.state, ChildResults([done]))
    assert isinstance(action, CallModel)
    assert [m["role"] for m in action.messages[-3:]] == ["tool", "tool", "user"] and action.messages[-1] == shown
