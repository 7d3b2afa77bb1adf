"""The sim's debate script, on the very tasks the debate strategy writes."""

from __future__ import annotations

import jsonschema
import openai
import pytest

from covey.models.sim import directives as sim_directives
from covey.models.sim.directives import DirectiveError
from covey.models.sim.scripted import SCRIPTS, Prompt
from covey.models.sim.scripted.debate import critique, proposal, revision
from covey.models.sim.structured import Answers
from covey.models.structured import response_format
from covey.orchestration.debate import (
    PROPOSAL_SCHEMA,
    REVISION_SCHEMA,
    critic_task,
    critique_schema,
    proposer_task,
    reviser_task,
)
from tests.models.sim.test_handler import ask


def prompt(task, schema):
    directives = sim_directives.parse(task)
    return Prompt(task, task, directives, Answers(str(directives.result), directives.result, 0.5), schema)


def propose(task, index, count=3):
    return proposal(prompt(proposer_task(task, index, count), PROPOSAL_SCHEMA))


def critique_of(task, index, proposals):
    targets = [int(i) for i in proposals if int(i) != index]
    return critique(prompt(critic_task(task, index, 3, 1, proposals, None), critique_schema(targets)))


def test_every_schema_is_scripted():
    assert (SCRIPTS["proposal"], SCRIPTS["critique"], SCRIPTS["revision"]) == (proposal, critique, revision)


def revise(task, index, proposals):
    return revision(prompt(reviser_task(task, index, 2, 1, proposals, {}), REVISION_SCHEMA))


def test_revise_splits_the_proposals_and_every_revision_takes_the_right_answer():
    task = "What is 6 * 7? [sim:debate revise]"
    assert [propose(task, i)["answer"] for i in range(2)] == ["42", "43"]
    proposals = {"0": {"answer": "42"}, "1": {"answer": "43"}}
    answers = [revise(task, i, proposals) for i in range(2)]
    assert [a["answer"] for a in answers] == ["42", "42"]
    for answer in answers:
        jsonschema.validate(answer, REVISION_SCHEMA)


def test_split_debaters_keep_their_answers_when_revising():
    proposals = {"0": {"answer": "42"}, "1": {"answer": "43"}}
    assert revise("What is 6 * 7? [sim:debate split]", 1, proposals)["answer"] == "43"


def test_every_debater_proposes_the_right_number_more_or_less_sure():
    answers = [propose("What is 6 * 7?", i) for i in range(3)]
    assert [a["answer"] for a in answers] == ["42", "42", "42"]
    assert [a["confidence"] for a in answers] == [0.9, 0.85, 0.8]
    assert propose("What is 6 * 7?", 9, count=10)["confidence"] == 0.5
    for answer in answers:
        jsonschema.validate(answer, PROPOSAL_SCHEMA)


def test_split_debaters_each_answer_something_else():
    answers = [propose("What is 6 * 7? [sim:debate split]", i)["answer"] for i in range(3)]
    assert answers == ["42", "43", "44"]


def test_a_split_without_arithmetic_varies_the_text():
    plain = [propose("name a colour [sim:debate split]", i)["answer"] for i in range(2)]
    assert plain[1] == f"{plain[0]} (variant 1)"


def test_critics_score_agreement_high_and_disagreement_low():
    proposals = {str(i): {"answer": a, "confidence": 0.9, "reasoning": "r"} for i, a in enumerate(["42", "42", "7"])}
    answer = critique_of("What is 6 * 7?", 0, proposals)
    assert answer["scores"] == {"1": 0.9, "2": 0.1}
    assert critique_of("What is 6 * 7?", 2, proposals)["scores"] == {"0": 0.1, "1": 0.1}
    jsonschema.validate(answer, critique_schema([1, 2]))


def test_an_unknown_debate_argument_is_refused():
    with pytest.raises(DirectiveError, match=r"\[sim:debate agree\]"):
        propose("What is 6 * 7? [sim:debate agree]", 0)


def test_through_the_sdk_a_named_schema_gets_the_script_and_a_bad_argument_a_400():
    schema = {"response_format": response_format(PROPOSAL_SCHEMA, "proposal")}
    reply = ask(proposer_task("What is 2 + 3? [sim:debate split]", 1, 2), **schema)
    assert '"answer": "6"' in reply.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="expected \\[sim:debate split\\] or"):
        ask(proposer_task("What is 2 + 3? [sim:debate nope]", 1, 2), **schema)
