"""The sim's scripted answers to orchestrate's planning and decision calls."""

from __future__ import annotations

import json

import openai
import pytest

from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ModelReply
from covey.models.sim import directives as sim_directives
from covey.models.sim.directives import DirectiveError
from covey.models.sim.handler import make_handler
from covey.models.sim.scripted import SCRIPTS, Prompt
from covey.models.sim.scripted import orchestrate as scripted
from covey.models.sim.scripted.orchestrate import UNANSWERED, assignments, decision, qa_verdict
from covey.models.sim.structured import Answers
from covey.models.structured import parse
from covey.orchestration import orchestrate
from covey.orchestration.actions import ChildResults, Spawn
from covey.results import AgentResult
from covey.spec import AgentSpec
from covey.status import AgentStatus
from tests.models.sim.test_handler import ask

CTX = RunContext(job_id="j", agent_id="root", budget=Budget())


def planning(task: str, **options) -> tuple[AgentSpec, Prompt]:
    """The prompt of the strategy's real planning call on ``task``."""
    spec = AgentSpec(task=task, strategy="orchestrate", options=options)
    call = orchestrate.start(spec, CTX)
    return spec, prompt_of(task, call.messages[-1]["content"], call.schema)


def prompt_of(task: str, last: str, schema: dict) -> Prompt:
    d = sim_directives.parse(task)
    return Prompt(task, last, d, Answers(str(d.result), d.result, 0.5), schema)


def deciding(task: str, reports: list[tuple[str, AgentStatus, str | None, str | None]]) -> Prompt:
    """The prompt of the strategy's real decision call after these reports."""
    spec = AgentSpec(task=task, strategy="orchestrate")
    pairs = [{"specialist": name, "task": task} for name, *_ in reports]
    first = orchestrate.start(spec, CTX)
    results = iter(
        [
            AgentResult(job_id="j", agent_id=f"a{i}", role=n, status=s, output=o, error=e)
            for i, (n, s, o, e) in enumerate(reports)
        ]
    )
    call = orchestrate.resume(spec, CTX, first.state, ModelReply(content="", parsed={"assignments": pairs}))
    while isinstance(call, Spawn):  # each wave answered with the next reports, in order
        wave = ChildResults([next(results) for _ in call.children])
        call = orchestrate.resume(spec, CTX, call.state, wave)
    return prompt_of(task, call.messages[-1]["content"], call.schema)


def test_every_script_is_registered_under_the_strategys_schema_names():
    assert (SCRIPTS["assignments"], SCRIPTS["decision"], SCRIPTS["qa_verdict"]) == (assignments, decision, qa_verdict)


def test_arithmetic_gets_two_calculating_analysts_a_writer_and_a_checker_carrying_the_task():
    _, prompt = planning("What is 6 * 7?")
    plan = assignments(prompt)
    parse(json.dumps(plan), prompt.schema)
    assert [a["specialist"] for a in plan["assignments"]] == ["SecurityExpert", "LinterExpert", "Writer", "QATester"]
    assert all("What is 6 * 7?" in a["task"] for a in plan["assignments"])
    assert "[sim:write orchestrate/answer.md]" in plan["assignments"][2]["task"]


def qa_prompt(task: str, round_: int) -> Prompt:
    return prompt_of(f"As QATester, verify: {task}\n\nQA round {round_}: verify", "", orchestrate.QA_SCHEMA)


def test_qa_fails_the_rounds_up_to_qa_fail_then_passes():
    task = "[sim:orchestrate qa_fail=1] What is 6 * 7?"
    assert qa_verdict(qa_prompt(task, 1))["passed"] is False
    assert qa_verdict(qa_prompt(task, 2))["passed"] is True
    assert qa_verdict(qa_prompt("What is 6 * 7?", 1)) == {
        "passed": True,
        "findings": "round 1: the written result matches 42",
    }
    parse(json.dumps(qa_verdict(qa_prompt(task, 1))), orchestrate.QA_SCHEMA)


def test_calculator_holders_come_first_on_arithmetic():
    roster = [
        {"name": "Reader", "role": "r", "tools": ["read_file"]},
        {"name": "Counter", "role": "r", "tools": ["calculator"]},
        {"name": "Checker", "role": "r"},
    ]
    _, prompt = planning("What is 1 + 2?", specialists=roster)
    assert [a["specialist"] for a in assignments(prompt)["assignments"]] == ["Counter", "Checker"]


def test_the_plan_stays_within_max_items():
    _, prompt = planning("What is 1 + 2?", max_specialists=1)
    assert [a["specialist"] for a in assignments(prompt)["assignments"]] == ["SecurityExpert"]


def test_the_directive_picks_and_fails_specialists():
    _, prompt = planning("[sim:orchestrate pick=QATester,Writer fail=QATester] What is 2 * 3?")
    plan = assignments(prompt)["assignments"]
    assert [a["specialist"] for a in plan] == ["QATester", "Writer"]
    assert plan[0]["task"].endswith("[sim:fail 500]") and "[sim:fail" not in plan[1]["task"]


@pytest.mark.parametrize(
    "directive, error",
    [
        ("[sim:orchestrate pick=Nobody]", "no specialist named Nobody"),
        ("[sim:orchestrate fail=Writer pick=QATester]", "unassigned specialists Writer"),
        ("[sim:orchestrate retry=2]", "expected pick=NAME"),
        ("[sim:orchestrate qa_fail=x]", "qa_fail=K"),
    ],
)
def test_a_bad_directive_fails_loudly(directive, error):
    _, prompt = planning(f"{directive} What is 2 * 3?")
    with pytest.raises(DirectiveError, match=error):
        assignments(prompt)


def test_the_decision_takes_the_number_the_reports_agree_on():
    prompt = deciding(
        "What is 6 * 7?",
        [
            ("SecurityExpert", AgentStatus.FAILED, None, "model call failed: HTTP 500"),
            ("LinterExpert", AgentStatus.COMPLETED, "42", None),
            ("Writer", AgentStatus.COMPLETED, "wrote 40 chars", None),
            ("QATester", AgentStatus.COMPLETED, "42", None),
        ],
    )
    answer = decision(prompt)
    parse(json.dumps(answer), prompt.schema)
    assert answer == {"answer": "42", "rationale": "LinterExpert, QATester reported 42"}


def test_without_a_number_in_the_reports_it_answers_directly_and_says_so():
    prompt = deciding("What is 6 * 7?", [("QATester", AgentStatus.BUDGET_EXCEEDED, None, "spawn refused")])
    assert decision(prompt) == {"answer": "42", "rationale": UNANSWERED}


def test_through_the_handler_a_bad_directive_is_a_400():
    _, prompt = planning("[sim:orchestrate pick=Nobody] What is 2 * 3?")
    fmt = {"type": "json_schema", "json_schema": {"name": "assignments", "schema": prompt.schema}}
    with pytest.raises(openai.BadRequestError, match="no specialist named Nobody"):
        ask(
            prompt.task, history=[{"role": "user", "content": prompt.last}], response_format=fmt, handler=make_handler()
        )


def test_through_the_handler_the_plan_is_the_scripts():
    _, prompt = planning("What is 2 * 3?")
    fmt = {"type": "json_schema", "json_schema": {"name": "assignments", "schema": prompt.schema}}
    reply = ask(prompt.task, history=[{"role": "user", "content": prompt.last}], response_format=fmt)
    assert json.loads(reply.choices[0].message.content) == assignments(prompt)


def test_the_sim_reads_the_schema_names_and_labels_the_strategy_writes():
    for name in ("ASSIGNMENTS", "DECISION", "QA_VERDICT", "ROSTER_LABEL", "REPORTS_LABEL"):
        assert getattr(scripted, name) == getattr(orchestrate, name), name
