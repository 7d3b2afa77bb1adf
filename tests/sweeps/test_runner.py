"""The runner's decisions on an ended job follow the result's cause, never its error text."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from covey.results import AgentResult
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.sweeps import runner
from covey.sweeps.dataset import Sample
from covey.sweeps.grid import Config, Limits
from covey.sweeps.records import SKIPPED_BUDGET
from covey.sweeps.scorers import ScorerSpec, Scoring
from covey.sweeps.window import Window

SCOPE = "sweep:s1"


class Noted:
    """Stands in for the results log and the claims: notes what they are told."""

    def __init__(self) -> None:
        self.records: list = []
        self.claims: list = []

    def append(self, *records) -> None:
        self.records.extend(records)

    def record(self, *marks: tuple[str, str, str]) -> None:
        self.claims.extend(status for _, _, status in marks)


@pytest.fixture
def run():
    noted = Noted()
    return runner._Run(
        client=None,
        manifest=SimpleNamespace(scope=SCOPE, id="s1"),
        scoring=Scoring.build([ScorerSpec()]),
        log=noted,
        claims=noted,
        window=Window(8),
        retries=1,
        pending=iter(()),
        total=1,
        already_done=0,
    )


def ended(run, status: AgentStatus, error: str, cause: Cause) -> runner.Unit:
    unit = runner.Unit(
        Sample(id="1", input="What is 1 + 1?", target=2),
        Config(name="c", model=None, strategy="react", options={}, limits=Limits()),
        0,
    )
    result = AgentResult(status=status, job_id="j", agent_id="root", error=error, cause=cause)
    runner._ended(run, runner.Flight(unit, "j", time.monotonic()), result)
    runner._write(run)
    return unit


def test_the_sweeps_scope_refusing_with_others_in_flight_puts_the_unit_back(run):
    run.flights["other"] = None
    cause = Cause(kind=CauseKind.BUDGET, scope=SCOPE, resource=Resource.TOKENS)
    unit = ended(run, AgentStatus.BUDGET_EXCEEDED, "token budget exhausted", cause)
    assert list(run.again) == [unit] and run.window.size == 1 and not run.dry
    assert run.log.claims == [SKIPPED_BUDGET] and run.log.records == []


def test_the_sweeps_scope_refusing_a_unit_asked_with_nothing_else_in_flight_is_dry(run):
    """The first refusal seen alone may be older than flights that ended since (it met
    their reservations): the unit is asked once more on its own; refused again, dry."""
    run.window = Window(1)
    refused = Cause(kind=CauseKind.BUDGET, scope=SCOPE)
    ended(run, AgentStatus.BUDGET_EXCEEDED, "refused", refused)
    assert not run.dry and len(run.again) == 1 and run.log.records == []
    run.again.clear()
    ended(run, AgentStatus.BUDGET_EXCEEDED, "refused", refused)
    assert run.dry and [r.status for r in run.log.records] == [SKIPPED_BUDGET]


def test_a_job_short_on_its_own_budget_is_recorded_not_taken_for_a_dry_sweep(run):
    # Its error names the sweep's scope, as a person might read it: the cause says otherwise.
    cause = Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.TOKENS)
    ended(run, AgentStatus.BUDGET_EXCEEDED, f"token budget exhausted at agent root, not scope {SCOPE}", cause)
    assert not run.dry and not run.again and run.window.size == 8
    assert [r.status for r in run.log.records] == [AgentStatus.BUDGET_EXCEEDED.value]


def test_a_rate_limited_job_halves_the_window_and_goes_again(run):
    ended(run, AgentStatus.FAILED, "provider busy", Cause(kind=CauseKind.RATE_LIMITED, status=429))
    assert run.window.size == 4 and len(run.again) == 1


def test_a_model_error_whose_text_mentions_429_leaves_the_window_alone(run):
    ended(
        run,
        AgentStatus.FAILED,
        "model call failed: HTTP 500: upstream said HTTP 429",
        Cause(kind=CauseKind.MODEL_ERROR, status=500),
    )
    assert run.window.size == 8 and len(run.again) == 1


def test_a_unit_that_fails_then_completes_on_its_retry_is_one_completed_unit(run):
    unit = ended(run, AgentStatus.FAILED, "upstream down", Cause(kind=CauseKind.MODEL_ERROR, status=500))
    assert run.again.popleft() is unit and unit.attempt == 2
    assert run.progress().failed == 0 and run.progress().accuracy is None  # an attempt is not a failed sample
    answered = AgentResult(status=AgentStatus.COMPLETED, job_id="j2", agent_id="root", output="2")
    runner._ended(run, runner.Flight(unit, "j2", time.monotonic()), answered)
    runner._write(run)
    progress = run.progress()
    assert (progress.done, progress.failed, progress.accuracy) == (1, 0, 1.0)
    assert [(r.attempt, r.status) for r in run.log.records] == [(1, "failed"), (2, "completed")]


def test_a_unit_failing_for_good_counts_once_and_scores_0_in_the_live_accuracy(run):
    run.retries, run.total = 0, 2
    failed = ended(run, AgentStatus.FAILED, "upstream down", Cause(kind=CauseKind.MODEL_ERROR, status=500))
    other = runner.Unit(Sample(id="2", input="What is 1 + 1?", target=2), failed.config, 0)
    answered = AgentResult(status=AgentStatus.COMPLETED, job_id="j2", agent_id="root", output="2")
    runner._ended(run, runner.Flight(other, "j2", time.monotonic()), answered)
    progress = run.progress()
    assert (progress.done, progress.failed, progress.accuracy) == (1, 1, 0.5)
    assert progress.line().startswith("1/2 done, 1 failed, 0 skipped, accuracy 50.0% | ")
