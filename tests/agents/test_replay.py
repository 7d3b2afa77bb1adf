"""An Agents SDK agent through covey's loop, on a real Redis ledger and the sim, without Celery:
its calls are covey's, and a step run again replays them from their records."""

from __future__ import annotations

import uuid

import pytest

from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.config.settings import Settings
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.status import AgentStatus, CauseKind
from covey.worker import loop
from covey.worker.deps import Deps
from tests.agents import sdk_agents
from tests.images import png
from tests.worker.test_loop import dies_in_call, run_again

TRIAGE = "covey_example_agents.triage:triage"
REFUND = (
    '[sim:call lookup_order {"order_id": "A1"}] [sim:then transfer_to_billing {}] [sim:then refund {"order_id": "A1"}]'
)


@pytest.fixture
def deps(redis_server):
    return Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0))


def opened(deps, spec: AgentSpec) -> RunContext:
    ctx = RunContext(job_id=f"agents-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_tokens=50_000))
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    return ctx


def test_every_model_and_tool_call_of_an_sdk_run_with_a_handoff_is_reserved_settled_and_transcribed(deps):
    spec = AgentSpec(task=REFUND, agent=TRIAGE)
    ctx = opened(deps, spec)
    state, action = loop.begin(deps, ctx, spec)
    out = loop.advance(deps, state, action)
    assert isinstance(out, loop.Finished)
    result = out.result
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "refund of order A1 started")
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.cycles_used == result.usage.cycles == 4 and snap.tool_calls_used == result.usage.tool_calls == 2
    assert snap.tokens_used == result.usage.total_tokens and snap.tokens_reserved == 0


def test_a_step_run_again_replays_settled_model_and_tool_calls_and_charges_nothing_twice(deps, tmp_path):
    counter = tmp_path / "runs.txt"
    spec = AgentSpec(task=f'Count. [sim:call tally {{"path": "{counter}"}}]', agent="tests.agents.sdk_agents:counted")
    ctx = opened(deps, spec)
    dies_in_call(deps, ctx, spec, 2)  # the tool call's reply settles and the tool runs; the answer call dies
    assert counter.read_text().splitlines() == ["run"]

    out, rerun = run_again(deps, ctx, spec)  # the broker redelivers the step to a new run of it
    assert out.result.ok and out.result.output == "tallied 1", out.result.error
    assert rerun.calls == 1 and counter.read_text().splitlines() == ["run"]  # only the answer was asked anew
    snap = deps.ledger.snapshot(ctx.job_id)
    assert snap.cycles_used == out.result.usage.cycles == 2 and snap.tool_calls_used == 1
    assert snap.tokens_used == out.result.usage.total_tokens and snap.tokens_reserved == 0


def test_a_step_run_again_after_a_tools_image_shows_it_again_from_the_workspace(deps):
    spec = AgentSpec(task='Plot. [sim:call plot {"label": "sales"}]', agent="tests.agents.sdk_agents:plotting")
    ctx = opened(deps, spec)
    dies_in_call(deps, ctx, spec, 2)  # the plot was kept; the call that would show it dies
    out, rerun = run_again(deps, ctx, spec)
    drawn = png(9, 3)
    assert out.result.ok and rerun.calls == 1, out.result.error
    assert out.result.output.endswith(f"(saw [image image/png 9x3, {len(drawn)} bytes])"), out.result.output
    [kept] = [path for path in deps.workspace(ctx.job_id).files() if path.startswith("images/")]
    assert kept in out.result.output and deps.workspace(ctx.job_id).read_bytes(kept) == drawn


def test_a_rerun_that_asks_for_another_request_than_the_recorded_one_fails_nondeterministic(
    deps, tmp_path, monkeypatch
):
    drift = tmp_path / "instructions.txt"
    drift.write_text("Count with the tally tool.")
    monkeypatch.setattr(sdk_agents, "DRIFT_FILE", str(drift))
    spec = AgentSpec(
        task=f'Count. [sim:call tally {{"path": "{tmp_path / "runs.txt"}"}}]', agent="tests.agents.sdk_agents:drifting"
    )
    ctx = opened(deps, spec)
    dies_in_call(deps, ctx, spec, 2)

    drift.write_text("Count twice.")  # what the agent reads changed before its step ran again
    out, rerun = run_again(deps, ctx, spec)
    result = out.result
    assert result.status is AgentStatus.FAILED and rerun.calls == 0
    assert (result.cause.kind, result.cause.call) == (CauseKind.NONDETERMINISTIC, "root:1")
    assert "model call root:1 was replayed for another request" in result.error
    # Charged once for the replayed call; the call cut off by the crash keeps its hold until it expires.
    assert deps.ledger.snapshot(ctx.job_id).tokens_used == result.usage.total_tokens > 0
