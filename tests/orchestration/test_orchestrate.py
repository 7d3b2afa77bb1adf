"""orchestrate: plan, one analysis wave, writes one by one, decide from reports."""

from __future__ import annotations

import json

import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.orchestration import orchestrate
from covey.orchestration.actions import CallModel, ChildResults, Finish, Spawn, ToolResults
from covey.orchestration.specialists import BUILTIN, Specialist
from covey.results import AgentResult
from covey.spec import AgentSpec, InvalidSpec, JobSpec
from covey.status import AgentStatus
from tests.orchestration.checkpointing import resumed

CTX = RunContext(job_id="j", agent_id="root", budget=Budget())


def spec(**options) -> AgentSpec:
    return AgentSpec(task="What is 6 * 7?", strategy="orchestrate", options=options)


def plan(*pairs: tuple[str, str]) -> ModelReply:
    parsed = {"assignments": [{"specialist": name, "task": task} for name, task in pairs]}
    return ModelReply(content=json.dumps(parsed), parsed=parsed)


def result(role: str, status: AgentStatus = AgentStatus.COMPLETED, output: str | None = "42", error: str | None = None):
    return AgentResult(
        job_id="j", agent_id=f"root-sub-{role}", role=role, depth=1, status=status, output=output, error=error
    )


def decision(answer: str = "42") -> ModelReply:
    parsed = {"answer": answer, "rationale": "they agree"}
    return ModelReply(content=json.dumps(parsed), parsed=parsed)


def run_plan(s: AgentSpec, reply: ModelReply):
    first = orchestrate.start(s, CTX)
    return first, resumed(orchestrate, s, CTX, first.state, reply)


# --- options -----------------------------------------------------------------


def test_the_builtin_specialists_are_the_default():
    options = orchestrate.Options()
    assert [s.name for s in options.specialists] == ["SecurityExpert", "LinterExpert", "QATester", "Writer"]
    assert [s.kind for s in options.specialists] == ["analysis", "analysis", "qa", "write"]
    assert options.specialists[0].tools == ["read_file", "calculator"]
    assert options.specialists[3].tools == ["write_file", "read_file"]


def test_duplicate_names_are_refused_naming_them():
    twice = [{"name": "A", "role": "r"}, {"name": "B", "role": "r"}, {"name": "A", "role": "r", "kind": "write"}]
    with pytest.raises(InvalidSpec, match=r"options\.specialists: duplicate specialist names: A"):
        JobSpec.parse({"task": "x", "strategy": "orchestrate", "options": {"specialists": twice}})


@pytest.mark.parametrize(
    "options, field",
    [
        ({"specialists": []}, "options.specialists"),
        ({"max_specialists": 0}, "options.max_specialists"),
        ({"specialists": [{"name": "A", "role": "r", "kind": "reader"}]}, "options.specialists.0.kind"),
        ({"specialists": [{"name": "A", "role": "r", "tools": ["tele port"]}]}, "options.specialists.0.tools"),
        ({"specialists": [{"name": "two words", "role": "r"}]}, "options.specialists.0.name"),
        ({"rounds": 3}, "options.rounds"),
    ],
)
def test_bad_options_are_refused_naming_the_field(options, field):
    with pytest.raises(InvalidSpec, match=field.replace(".", r"\.")):
        JobSpec.parse({"task": "x", "strategy": "orchestrate", "options": options})


def test_spawn_tools_are_stripped_from_a_specialist():
    s = Specialist(name="A", role="r", tools=["spawn_agents", "calculator", "delegate", "calculator"])
    assert s.tools == ["calculator"]


# --- planning ----------------------------------------------------------------


def test_it_plans_first_with_no_tools_and_a_schema_of_known_specialists():
    action = orchestrate.start(spec(max_specialists=2), CTX)
    assert isinstance(action, CallModel)
    assert (action.tools, action.schema_name) == ([], "assignments")
    items = action.schema["properties"]["assignments"]
    assert items["maxItems"] == 2 and items["minItems"] == 1
    assert items["items"]["properties"]["specialist"]["enum"] == [s.name for s in BUILTIN]
    roster = action.messages[-1]["content"].splitlines()[-1].removeprefix(orchestrate.ROSTER_LABEL)
    assert [r["name"] for r in json.loads(roster)] == [s.name for s in BUILTIN]


def test_analysis_specialists_run_as_one_wave_of_react_children_without_spawn_tools():
    _, action = run_plan(spec(), plan(("Writer", "write it"), ("LinterExpert", "lint it"), ("SecurityExpert", "audit")))
    assert isinstance(action, Spawn)
    assert [c.role for c in action.children] == ["LinterExpert", "SecurityExpert"]
    assert [c.task for c in action.children] == ["lint it", "audit"]
    assert {c.strategy for c in action.children} == {"react"}
    assert all(c.tools == ["read_file", "calculator"] and not c.can_spawn for c in action.children)
    assert all(c.fraction == pytest.approx(1 / 7) for c in action.children)  # 3 specialists, 2 rounds, the decision
    assert "LinterExpert specialist" in action.children[0].instructions


def test_a_specialist_assigned_twice_keeps_its_first_task():
    _, action = run_plan(spec(), plan(("LinterExpert", "first"), ("LinterExpert", "second")))
    assert [c.task for c in action.children] == ["first"]
    assert [a.model_dump() for a in action.state.assignments] == [
        {"specialist": "LinterExpert", "kind": "analysis", "task": "first"}
    ]


def test_spawn_tools_never_reach_a_child_whatever_the_options_say():
    leaky = [{"name": "Spawner", "role": "r", "tools": ["spawn_agents", "delegate", "read_file"]}]
    _, action = run_plan(spec(specialists=leaky), plan(("Spawner", "look")))
    (child,) = action.children
    assert child.tools == ["read_file"] and child.strategy == "react"


# --- writes, reports and the decision -----------------------------------------


def test_writes_run_one_at_a_time_after_the_analysis_and_see_its_reports():
    s = spec(specialists=[*[b.model_dump() for b in BUILTIN], {"name": "Editor", "role": "r", "kind": "write"}])
    _, analysis = run_plan(s, plan(("Writer", "write"), ("LinterExpert", "test"), ("Editor", "edit")))
    first = resumed(orchestrate, s, CTX, analysis.state, ChildResults([result("LinterExpert")]))
    assert isinstance(first, Spawn) and [c.role for c in first.children] == ["Writer"]
    assert first.children[0].task == "write\n\nAnalysis reports:\n- LinterExpert (completed): 42"
    assert first.children[0].tools == ["write_file", "read_file"]
    second = resumed(orchestrate, s, CTX, first.state, ChildResults([result("Writer", output="wrote it")]))
    assert [c.role for c in second.children] == ["Editor"]
    decide = resumed(orchestrate, s, CTX, second.state, ChildResults([result("Editor", output="edited")]))
    assert isinstance(decide, CallModel) and decide.schema_name == "decision" and decide.tools == []


def verdict(passed: bool, findings: str = "checked") -> AgentResult:
    data = {"passed": passed, "findings": findings}
    return AgentResult(
        job_id="j",
        agent_id="root-sub-qa",
        role="QATester",
        depth=1,
        status=AgentStatus.COMPLETED,
        output=json.dumps(data),
        data=data,
    )


ROUND = [("LinterExpert", "check"), ("Writer", "write"), ("QATester", "verify")]


def one_round(s, state, qa):
    """Resume through a round's analysis and write waves up to its qa wave, then hand it ``qa``."""
    writer = resumed(orchestrate, s, CTX, state, ChildResults([result("LinterExpert")]))
    assert [c.role for c in writer.children] == ["Writer"]
    checker = resumed(orchestrate, s, CTX, writer.state, ChildResults([result("Writer", output="wrote 42")]))
    assert [c.role for c in checker.children] == ["QATester"]
    return checker, resumed(orchestrate, s, CTX, checker.state, ChildResults([qa]))


def test_qa_verifies_last_with_a_verdict_schema_and_the_write_reports():
    s = spec()
    _, first = run_plan(s, plan(*ROUND))
    checker, decide = one_round(s, first.state, verdict(True))
    (qa,) = checker.children
    assert qa.options == {"schema": orchestrate.QA_SCHEMA, "schema_name": "qa_verdict"} and not qa.can_spawn
    assert (
        qa.task == "verify\n\nQA round 1: verify the written result.\n\nWrite reports:\n- Writer (completed): wrote 42"
    )
    assert isinstance(decide, CallModel) and decide.schema_name == "decision"
    done = resumed(orchestrate, s, CTX, decide.state, decision())
    assert (done.data["rounds"], done.data["verdicts"]) == (
        1,
        [[{"specialist": "QATester", "passed": True, "findings": "checked"}]],
    )


def test_kinds_not_the_planned_order_put_qa_after_the_writes():
    _, first = run_plan(spec(), plan(("QATester", "verify"), ("Writer", "write")))
    assert [c.role for c in first.children] == ["Writer"]
    then = resumed(orchestrate, spec(), CTX, first.state, ChildResults([result("Writer", output="wrote")]))
    assert [c.role for c in then.children] == ["QATester"]


def test_a_failed_verdict_starts_another_round_carrying_its_findings():
    s = spec()
    _, first = run_plan(s, plan(*ROUND))
    _, second = one_round(s, first.state, verdict(False, "the file says 41"))
    assert isinstance(second, Spawn) and [c.role for c in second.children] == ["LinterExpert"]
    assert second.children[0].task == (
        "check\n\nRound 2: verification failed in round 1. Findings:\n- QATester: the file says 41"
    )
    checker, decide = one_round(s, second.state, verdict(False, "still 41"))
    assert "QA round 2" in checker.children[0].task
    assert isinstance(decide, CallModel)  # max_rounds=2: no third round, whatever QA says
    assert decide.state.round == 2


def test_a_qa_specialist_without_a_verdict_sends_nothing_round():
    s = spec()
    _, first = run_plan(s, plan(*ROUND))
    _, decide = one_round(s, first.state, result("QATester", AgentStatus.FAILED, output=None, error="HTTP 500"))
    assert isinstance(decide, CallModel) and decide.state.round == 1


def test_each_specialist_shares_the_budget_over_every_round_it_may_run():
    _, first = run_plan(spec(max_rounds=3), plan(*ROUND))
    assert first.children[0].fraction == pytest.approx(1 / (3 * 3 + 1))


def test_it_decides_from_reports_and_a_failed_specialist_says_so():
    s = spec(report_chars=20)
    _, wave = run_plan(s, plan(("SecurityExpert", "audit"), ("LinterExpert", "test")))
    failed = result(
        "SecurityExpert", AgentStatus.FAILED, output=None, error="model call failed: HTTP 500 after retries"
    )
    decide = resumed(orchestrate, s, CTX, wave.state, ChildResults([failed, result("LinterExpert")]))
    reports_line = decide.messages[-1]["content"].splitlines()[-1].removeprefix(orchestrate.REPORTS_LABEL)
    reports = json.loads(reports_line)
    assert [(r["specialist"], r["status"]) for r in reports] == [
        ("SecurityExpert", "failed"),
        ("LinterExpert", "completed"),
    ]
    assert reports[0]["report"] == "failed: model call …"  # cut to report_chars
    assert all("messages" not in r for r in reports)

    done = resumed(orchestrate, s, CTX, decide.state, decision("42"))
    assert isinstance(done, Finish)
    assert (done.status, done.output) == (AgentStatus.COMPLETED, "42")
    assert done.data["decision"] == {"answer": "42", "rationale": "they agree"}
    assert [a["specialist"] for a in done.data["assignments"]] == ["SecurityExpert", "LinterExpert"]
    assert done.data["reports"] == reports


def test_a_plan_of_writes_alone_skips_the_analysis_wave():
    _, action = run_plan(spec(), plan(("Writer", "write")))
    assert [c.role for c in action.children] == ["Writer"]
    assert action.children[0].task == "write"


def test_it_cannot_resume_from_the_wrong_outcome():
    first = orchestrate.start(spec(), CTX)
    with pytest.raises(TypeError, match="phase 'plan'"):
        orchestrate.resume(spec(), CTX, first.state, ToolResults({}))
    with pytest.raises(TypeError, match="ChildResults"):
        orchestrate.resume(spec(), CTX, first.state, ChildResults([]))


def test_resume_leaves_the_callers_state_alone():
    first = orchestrate.start(spec(), CTX)
    before = first.state.model_dump_json()
    orchestrate.resume(spec(), CTX, first.state, plan(("QATester", "t")))
    assert first.state.model_dump_json() == before
