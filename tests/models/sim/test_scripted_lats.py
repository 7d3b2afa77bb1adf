"""The sim's scripted answers to lats: candidates by path depth, evaluations by action."""

from __future__ import annotations

import json

import httpx2
import openai
import pytest

from covey.models.sim import directives as sim_directives
from covey.models.sim.handler import transport
from covey.models.sim.scripted import lats as script
from covey.models.sim.scripted.prompt import Prompt
from covey.models.sim.structured import Answers
from covey.models.structured import response_format
from covey.orchestration import lats


def prompt(task: str, last: str = "", schema=None) -> Prompt:
    directives = sim_directives.parse(task)
    answers = Answers(str(directives.result), directives.result, 0.5)
    return Prompt(task, last or task, directives, answers, schema or lats.EVALUATION_SCHEMA)


def proposals(count: int, steps: list[str], task: str = "What is 6 * 7?") -> list[str]:
    path = "\n".join(f"{n}. {s}" for n, s in enumerate(steps, 1)) or "(no actions yet)"
    return script.candidates(prompt(task, f"Path:\n{path}\n\nPropose", lats.candidates_schema(count)))["candidates"]


def judged(steps: list[str], task: str = "What is 6 * 7?", simulation: int = 1) -> dict:
    return script.evaluation(prompt(lats._evaluation_task(task, simulation, steps)))


def test_candidates_are_the_first_n_rotated_by_the_path_depth():
    three = ["compute 6 * 7 directly", "estimate 6 * 7 roughly", "restate the task before answering"]
    assert proposals(3, []) == three
    assert proposals(3, ["x"]) == three[2:] + three[:2]
    assert proposals(3, ["x", "y", "z"]) == three
    assert proposals(1, ["x", "y"]) == ["compute 6 * 7 directly"]
    assert proposals(5, [])[3:] == ["try approach 4", "try approach 5"]
    assert proposals(2, [], task="name a colour") == ["compute the answer directly", "estimate the answer roughly"]


def test_the_direct_computation_scores_full_marks_with_the_right_number():
    assert judged(["estimate 6 * 7 roughly", "compute 6 * 7 directly"]) == {
        "score": 1.0,
        "reflection": "the direct computation answers the task",
        "solved": True,
        "answer": "42",
    }


@pytest.mark.parametrize(
    "step, score, answer",
    [("estimate 6 * 7 roughly", 0.4, "40"), ("restate the task", 0.2, ""), ("try approach 4", 0.1, "")],
)
def test_other_actions_score_lower_and_never_solve(step, score, answer):
    verdict = judged([step])
    assert (verdict["score"], verdict["solved"], verdict["answer"]) == (score, False, answer)


def test_solve_k_delays_solving_to_simulation_k():
    task = "[sim:lats solve=3] What is 6 * 7?"
    assert [judged(["compute 6 * 7 directly"], task, k)["solved"] for k in (1, 2, 3, 4)] == [False, False, True, True]
    assert judged(["compute 6 * 7 directly"], task, 1)["score"] == 1.0


@pytest.mark.parametrize("args", ["solve=0", "solve=x", "later"])
def test_a_malformed_lats_directive_is_refused_naming_it(args):
    with pytest.raises(sim_directives.DirectiveError, match=rf"\[sim:lats {args}\]"):
        judged(["compute 6 * 7 directly"], f"[sim:lats {args}] What is 6 * 7?")


def test_through_the_sdk_the_answers_match_the_schemas_lats_asks_for():
    http = httpx2.Client(transport=transport())
    sdk = openai.OpenAI(api_key="sim", base_url="http://sim.covey/v1", http_client=http, max_retries=0)

    def ask(messages, schema, name):
        form = response_format(schema, name)
        reply = sdk.chat.completions.create(model="sim", messages=messages, response_format=form)
        return json.loads(reply.choices[0].message.content)

    proposal = ask(
        [{"role": "user", "content": "What is 2 + 3?"}, {"role": "user", "content": "Path:\n1. x"}],
        lats.candidates_schema(2),
        lats.CANDIDATES_SCHEMA_NAME,
    )
    assert proposal == {"candidates": ["estimate 2 + 3 roughly", "compute 2 + 3 directly"]}
    task = lats._evaluation_task("What is 2 + 3?", 1, proposal["candidates"][1:])
    verdict = ask([{"role": "user", "content": task}], lats.EVALUATION_SCHEMA, lats.EVALUATION_SCHEMA_NAME)
    assert verdict["answer"] == "5" and verdict["solved"] is True
