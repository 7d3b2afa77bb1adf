"""Guardrails a job names, run by the worker that serves them: a tripwire on the job's
input, an agent's answer or a tool's result ends the agent with cause ``guardrail``
naming it; one on a tool call may tell the model instead; an unknown one is
refused at submit."""

from __future__ import annotations

import pytest

from covey.client import Client
from covey.spec import InvalidSpec
from covey.status import CauseKind
from tests.integration.conftest import ROOT, called, own_worker

GUARDED = ["no_passwords", "no_shouting", "small_sums", "no_leaks"]


@pytest.fixture(scope="module")
def client():
    with own_worker(COVEY_TOOLS="tests.integration.served_tools", PYTHONPATH=str(ROOT)) as (_, client):
        yield client


def run(client: Client, task: str):
    return client.run(client.spec(task, tools=called(task), guardrails=GUARDED), timeout=60)


def test_a_job_passing_its_guardrails_runs_as_without_them(client):
    assert run(client, "What is 2 + 3?").output == "5"


@pytest.mark.parametrize(
    "task, guardrail, said",
    [
        (
            "my password is hunter2, What is 2 + 3?",
            "no_passwords",
            "stopped the job's input: the task carries a password",
        ),
        ("[sim:answer WOW!!!] shout", "no_shouting", "stopped the agent's answer: the answer shouts"),
        (
            '[sim:call echo {"text": "sk-live-123"}] echo',
            "no_leaks",
            "stopped the result of echo: a tool returned a secret",
        ),
    ],
)
def test_a_tripwire_ends_the_agent_with_cause_guardrail_naming_it(client, task, guardrail, said):
    result = run(client, task)
    assert result.status == "failed" and result.cause.kind is CauseKind.GUARDRAIL
    assert result.cause.guardrail == guardrail
    assert result.error == f"guardrail {guardrail} {said}"


def test_a_child_keeps_its_parents_guardrails(client):
    result = run(client, "[sim:delegate hello!!!] pass it on")
    (child,) = result.children
    assert child.status == "failed" and child.cause.guardrail == "no_shouting"


def test_a_tool_guardrail_may_tell_the_model_instead_of_ending_the_agent(client):
    result = run(client, '[sim:call calculator {"expression": "1234567 * 7654321 + 1234567"}] multiply')
    assert result.ok
    assert (
        result.output
        == "error: guardrail small_sums stopped this call: expressions of more than 20 characters are not run"
    )


def test_a_guardrail_no_worker_serves_is_refused_at_submit(client):
    with pytest.raises(
        InvalidSpec, match="guardrail 'no_shoutin' is served by no worker on queue 'covey'.*did you mean 'no_shouting'"
    ):
        client.submit(client.spec("What is 2 + 3?", guardrails=["no_shoutin"]))
