"""The fault hook: armed points parse, bad ones are refused naming the setting."""

from __future__ import annotations

import pytest

from covey.config import faults


def test_an_unarmed_point_passes():
    faults.arm("after_pop:kill:3")
    faults.at("after_checkpoint")
    faults.at("after_pop")  # the first of three passes
    faults.arm(None)


@pytest.mark.parametrize("spec", ["after_pop", "after_pop:stop", "after_pop:kill:x", "after_pop:kill:1:2"])
def test_a_bad_fault_is_refused(spec):
    with pytest.raises(ValueError, match="COVEY_FAULT"):
        faults.arm(spec)
