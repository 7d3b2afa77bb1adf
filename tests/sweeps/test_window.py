import pytest

from covey.sweeps.window import Window


def test_rate_limits_halve_the_window_and_successes_widen_it_back():
    w = Window(8)
    w.rate_limited()
    w.rate_limited()
    assert w.size == 2 and w.low == 2
    for _ in range(2):
        w.succeeded()
    assert w.size == 3
    for _ in range(3 + 4 + 5 + 6 + 7):
        w.succeeded()
    assert w.size == 8
    w.succeeded()
    assert w.size == 8  # never past the ceiling


def test_it_never_shuts_below_one():
    w = Window(1)
    w.rate_limited()
    assert w.size == 1


def test_budget_pressure_shuts_it_to_one():
    w = Window(16)
    w.budget_pressed()
    assert w.size == 1 and w.low == 1


def test_a_window_needs_room_for_a_job():
    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        Window(0)
