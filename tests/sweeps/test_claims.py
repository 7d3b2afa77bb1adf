"""Claims against a real Redis: two submitters never both run a unit."""

import pytest

from covey import keys
from covey.sweeps.claims import Claims


@pytest.fixture
def sweep_id(request):
    return f"t{abs(hash(request.node.name)) % 10**9}"


def test_the_first_submitter_wins_and_the_other_waits(redis_client, sweep_id):
    a, b = (
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
    )
    a.renew(), b.renew()
    assert a.take("u", "job-a").outcome == "new"
    assert b.take("u", "job-b").outcome == "busy"


def test_a_recorded_outcome_is_done_for_others_and_a_failure_may_run_again(redis_client, sweep_id):
    a, b = (
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
    )
    a.renew(), b.renew()
    a.take("kept", "j1")
    a.record(("kept", "j1", "completed"))
    assert b.take("kept", "j2").outcome == "done"
    a.take("retry", "j3")
    a.record(("retry", "j3", "failed"))
    assert b.take("retry", "j4").outcome == "new"
    assert a.take("retry", "j5").outcome == "busy"  # b runs it now


def test_units_taken_together_each_get_the_outcome_taken_alone_would(redis_client, sweep_id):
    a, b = (
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
    )
    a.renew(), b.renew()
    a.take_all([("kept", "j1"), ("held", "j2")])
    a.record(("kept", "j1", "completed"))
    takes = b.take_all([("kept", "j3"), ("held", "j4"), ("free", "j5")])
    assert [(t.outcome, t.job_id) for t in takes] == [("done", "j1"), ("busy", None), ("new", "j5")]


def test_a_dead_submitters_job_is_adopted_not_run_again(redis_client, sweep_id):
    dead, alive = (
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
        Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS),
    )
    dead.renew(), alive.renew()
    dead.take("u", "job-1")
    assert alive.take("u", "job-2").outcome == "busy"
    dead.release()  # its lease lapsed
    take = alive.take("u", "job-2")
    assert (take.outcome, take.job_id) == ("adopt", "job-1")
    assert Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS).take("u", "job-3").outcome in (
        "busy",
    )  # now the adopter's


def test_a_record_for_a_job_the_claim_no_longer_names_is_ignored(redis_client, sweep_id):
    a = Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS)
    a.renew()
    a.take("u", "j1")
    a.record(("u", "j1", "failed"))
    a.take("u", "j2")
    a.record(("u", "j1", "completed"))  # a late word about the old attempt
    assert Claims(redis_client, sweep_id, keys.DEFAULT_JOB_TTL_SECONDS).take("u", "j3").outcome == "busy"
