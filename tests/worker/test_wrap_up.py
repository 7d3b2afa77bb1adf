"""An agent whose budget runs out answers in a wrap-up call: the loop on a real Redis ledger and the sim."""

from __future__ import annotations

import pytest

from covey.budgets.budget import Budget
from covey.config.settings import Settings
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.worker import wrap_up
from covey.worker.deps import Deps
from tests.worker.test_loop import CountingLLM, root, run


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


class AskedLLM(CountingLLM):
    """The real LLM, keeping the messages and tools of every call that reaches it."""

    def __init__(self, llm) -> None:
        super().__init__(llm)
        self.asked: list[tuple[list, list]] = []

    def call(self, model, messages, tools, *args, **kwargs):
        self.asked.append(([dict(m) for m in messages], tools))
        return super().call(model, messages, tools, *args, **kwargs)


def test_an_agent_whose_budget_runs_out_answers_without_tools(deps):
    deps.llm = asked = AskedLLM(deps.llm)
    ctx = root(deps, Budget(max_tokens=800))  # the first call, with its tools' schemas, cannot fit
    out = run(deps, ctx, "What is 2 * 21?")
    result = out.result
    assert (result.status, result.output, result.wrapped_up) == (AgentStatus.COMPLETED, "42", True)
    assert result.cause == Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.TOKENS)
    assert result.data["wrapped_up"] is True
    assert result.data["short"].startswith("token budget exhausted at agent root (800 left")
    [(messages, tools)] = asked.asked  # one call: the wrap-up
    assert tools == [] and messages[-1] == {"role": "user", "content": wrap_up.NOTE}
    assert deps.ledger.snapshot(ctx.job_id).tokens_used == result.usage.total_tokens <= 800


def test_an_agent_that_ran_out_mid_way_keeps_what_it_learnt_in_its_answer(deps):
    deps.llm = asked = AskedLLM(deps.llm)
    ctx = root(deps, Budget(max_tokens=2000))  # the calculator call fits, the answer after it does not
    out = run(deps, ctx, "What is 2 * 21?")
    assert (out.result.output, out.result.wrapped_up, out.result.usage.cycles) == ("42", True, 2)
    (first, offered), (last, none) = asked.asked
    assert offered and none == []
    assert any(m["role"] == "tool" for m in last)  # the tool's result is in the wrap-up's conversation
    assert deps.ledger.snapshot(ctx.job_id).tokens_used <= 2000


def test_a_budget_too_small_for_a_wrap_up_ends_budget_exceeded_saying_so(deps):
    deps.llm = counting = CountingLLM(deps.llm)
    ctx = root(deps, Budget(max_tokens=60))
    out = run(deps, ctx, "What is 2 * 21?")
    assert out.result.status is AgentStatus.BUDGET_EXCEEDED and not out.result.wrapped_up
    assert "; its wrap-up call ended too: token budget exhausted at agent root (60 left" in out.result.error
    assert out.result.cause == Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.TOKENS)
    assert counting.calls == 0


def test_a_big_enough_budget_is_no_wrap_up(deps):
    ctx = root(deps, Budget(max_tokens=10_000))
    out = run(deps, ctx, "What is 2 * 21?")
    assert (out.result.output, out.result.wrapped_up, out.result.cause, out.result.data) == ("42", False, None, None)
