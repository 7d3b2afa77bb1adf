"""``covey plan``'s table: a step a row, what ran it, how it ended, when and for how
long, its input and its output or error on one line each."""

from __future__ import annotations

from covey.cli.plans import table


def step(step_id: str, **fields) -> dict:
    """A step's audit record with no times, role or tool unless given."""
    record = dict.fromkeys(("role", "tool", "output", "error", "started_at", "finished_at"))
    return {"id": step_id, **record, **fields}


STEPS = [
    step(
        "step_1",
        tool="calculator",
        status="completed",
        input="6 * 7",
        output="42",
        started_at="2026-12-06T12:00:01.250000+00:00",
        finished_at="2026-12-06T12:00:01.300000+00:00",
    ),
    step(
        "step_2",
        role="checker",
        status="failed",
        input="Check that\n42 answers " + "x" * 100,
        error="model call failed",
    ),
]


def test_each_step_is_one_row_in_the_order_given():
    head, first, second = table(STEPS).splitlines()
    assert head.split() == ["step", "by", "status", "started", "seconds", "input", "output", "or", "error"]
    assert first.split()[:7] == ["step_1", "tool", "calculator", "completed", "12:00:01.250", "0.050", "6"]
    assert first.rstrip().endswith("42")
    assert second.split()[:3] == ["step_2", "checker", "failed"]
    assert "error: model call failed" in second and "Check that 42 answers" in second and "…" in second
