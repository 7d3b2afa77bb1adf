"""An agent told its budget reads one note per call, also when that call is asked again."""

from __future__ import annotations

import pytest

from covey.budgets.budget import Budget
from covey.config.settings import Settings
from covey.worker import budget_notice
from covey.worker.deps import Deps
from tests.worker.test_loop import root, run
from tests.worker.test_wrap_up import AskedLLM


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=1))


def notes(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(budget_notice.PREFIX)]


def test_a_call_asked_again_after_it_went_unanswered_carries_one_note_as_of_then(deps):
    deps.llm = asked = AskedLLM(deps.llm)
    ctx = root(deps, Budget(max_tokens=20_000))
    out = run(deps, ctx, "[sim:fail timeout] What is 2 * 21?", budget_notice=True, tools=[])
    assert out.result.error.startswith("model call timed out")  # the sim times every first call out
    (first, _), (again, _) = asked.asked  # asked once more (model_retries=1)
    assert len(notes(first)) == 1 and len(notes(again)) == 1
    assert again[:-1] == first[:-1]  # the same call, its note renewed: the first charged its reservation
    assert notes(first) != notes(again)


def test_a_note_already_last_is_replaced_and_any_other_message_is_followed():
    old = {"role": "system", "content": f"{budget_notice.PREFIX}9 tokens."}
    new = {"role": "system", "content": f"{budget_notice.PREFIX}5 tokens."}
    messages = [{"role": "user", "content": "go"}, old]
    budget_notice.told(messages, new)
    assert messages == [{"role": "user", "content": "go"}, new]
    messages.append({"role": "tool", "content": "42"})
    budget_notice.told(messages, old)
    assert messages[-2:] == [{"role": "tool", "content": "42"}, old]
