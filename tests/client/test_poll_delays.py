"""An awaited job is looked at soon, then less often, never less often than its interval."""

from __future__ import annotations

import itertools

from covey.client.client import poll_delays


def test_looks_start_at_ten_milliseconds_and_double_up_to_the_interval():
    assert list(itertools.islice(poll_delays(0.5), 8)) == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5]


def test_an_interval_below_the_first_look_is_kept():
    assert list(itertools.islice(poll_delays(0.005), 3)) == [0.005, 0.005, 0.005]
