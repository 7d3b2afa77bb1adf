"""Every cap and timeout has an upper bound that survives JSON and Redis.

Integers stay under 2^53 (what JSON readers and the ledger's Lua hold exactly),
seconds are finite and at most ``MAX_SECONDS`` (so a deadline is a datetime),
booleans are not numbers, and an out-of-range value is refused naming its field.
The client, CLI and wire are tested in tests/integration/test_ranges_io.py.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from covey.budgets.budget import MAX_COUNT, MAX_SECONDS, Budget
from covey.config.settings import Settings
from covey.spec import MAX_CALL_TOKENS, InvalidSpec, JobSpec

TOO_BIG = [10**20, 10**40, 2**63, MAX_COUNT + 1]


@pytest.mark.parametrize("field", ["max_tokens", "max_cycles", "max_agents", "max_depth"])
@pytest.mark.parametrize("value", TOO_BIG)
def test_budget_caps_past_2_to_the_53_are_refused_naming_the_field(field, value):
    with pytest.raises(InvalidSpec, match=f"budget.{field}: Input should be less than or equal to {MAX_COUNT}"):
        JobSpec.parse({"task": "x", "budget": {field: value}})


@pytest.mark.parametrize("field", ["max_tokens", "max_cycles", "max_agents", "max_depth"])
def test_the_largest_cap_is_taken(field):
    assert getattr(JobSpec.parse({"task": "x", "budget": {field: MAX_COUNT}}).budget, field) == MAX_COUNT


@pytest.mark.parametrize(
    "data, field",
    [
        ({"budget": {"max_tokens": True}}, "budget.max_tokens"),
        ({"budget": {"max_depth": False}}, "budget.max_depth"),
        ({"max_cycles": True}, "max_cycles"),
        ({"max_call_tokens": True}, "max_call_tokens"),
        ({"timeout": True}, "timeout"),
        ({"child_fraction": True}, "child_fraction"),
        ({"model_params": {"seed": True}}, "model_params.seed"),
        ({"model_params": {"temperature": True}}, "model_params.temperature"),
    ],
)
def test_a_boolean_is_not_a_number(data, field):
    with pytest.raises(InvalidSpec, match=f"{field}: Input should be a valid"):
        JobSpec.parse({"task": "x", **data})


@pytest.mark.parametrize(
    "data, field",
    [
        ({"budget": {"max_tokens": 5.0}}, "budget.max_tokens"),
        ({"budget": {"max_tokens": "5"}}, "budget.max_tokens"),
        ({"budget": {"max_tokens": 1e20}}, "budget.max_tokens"),
        ({"max_cycles": 10**40}, "max_cycles"),
        ({"max_call_tokens": MAX_CALL_TOKENS + 1}, "max_call_tokens"),
        ({"max_call_tokens": 0}, "max_call_tokens"),
        ({"timeout": 1e308}, "timeout"),
        ({"timeout": 10**400}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),
        ({"timeout": MAX_SECONDS + 1}, "timeout"),
        ({"timeout": 0}, "timeout"),
        ({"child_fraction": float("nan")}, "child_fraction"),
        ({"child_fraction": 1e308}, "child_fraction"),
        ({"model_params": {"seed": 2**63}}, "model_params.seed"),
        ({"model_params": {"seed": -(2**63)}}, "model_params.seed"),
        ({"model_params": {"temperature": float("nan")}}, "model_params.temperature"),
        ({"model_params": {"top_p": float("inf")}}, "model_params.top_p"),
        ({"budget": {"deadline": "0001-01-01T00:00:00+01:00"}}, "budget.deadline"),
        ({"budget": {"deadline": "9999-12-31T23:59:59-01:00"}}, "budget.deadline"),
    ],
)
def test_out_of_range_numbers_are_refused_naming_the_field(data, field):
    with pytest.raises(InvalidSpec) as e:
        JobSpec.parse({"task": "x", **data})
    assert str(e.value).startswith(f"invalid job spec: {field}: ")


def test_the_longest_timeout_is_still_a_deadline():
    spec = JobSpec.parse({"task": "x", "timeout": MAX_SECONDS, "max_call_tokens": MAX_CALL_TOKENS})
    assert spec.timeout == MAX_SECONDS and spec.max_call_tokens == MAX_CALL_TOKENS


def test_a_budget_built_in_python_is_bounded_too():
    with pytest.raises(ValidationError, match="max_tokens"):
        Budget(max_tokens=10**20)


@pytest.mark.parametrize(
    "variable, value, field",
    [
        ("COVEY_MAX_TOKENS", "100000000000000000000", "max_tokens"),
        ("COVEY_MAX_DEPTH", str(2**63), "max_depth"),
        ("COVEY_MODEL_TIMEOUT", "nan", "model_timeout"),
        ("COVEY_MODEL_TIMEOUT", "inf", "model_timeout"),
        ("COVEY_REDELIVERY_CHECK_SECONDS", "1e308", "redelivery_check_seconds"),
        ("COVEY_SIM_LATENCY_MS", "1" + "0" * 30, "sim_latency_ms"),
        ("COVEY_WORKER_CONCURRENCY", "1000000", "worker_concurrency"),
        ("COVEY_WORKER_PROCESSES", "0", "worker_processes"),
        ("COVEY_WORKER_PROCESSES", "1000000", "worker_processes"),
        ("COVEY_JOB_TTL", "5", "job_ttl"),
        ("COVEY_REDIS_OUTAGE_SECONDS", "nan", "redis_outage_seconds"),
        ("COVEY_REDIS_OUTAGE_SECONDS", "0", "redis_outage_seconds"),
    ],
)
def test_settings_out_of_range_are_refused_naming_the_setting(monkeypatch, variable, value, field):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as e:
        Settings()
    assert [err["loc"] for err in e.value.errors()] == [(field,)]
