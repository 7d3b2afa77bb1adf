"""``covey worker``'s parent: a child that exits unasked fails the whole worker, so a
supervisor's ``Restart=on-failure`` restarts it."""

from __future__ import annotations

import os
import sys

import pytest

from covey.worker import processes


def child(code: int):
    """Child 1 exits with ``code`` at once; the others would run for a minute."""
    return lambda i: [sys.executable, "-c", f"import sys, time; sys.exit({code}) if {i} == 1 else time.sleep(60)"]


@pytest.mark.parametrize(("code", "expected"), [(0, processes.EXIT_UNASKED), (3, 3)])
def test_a_child_that_exits_unasked_makes_the_worker_exit_non_zero(code, expected):
    assert processes.run(child(code), 2, dict(os.environ)) == expected
