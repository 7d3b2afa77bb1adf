"""A guardrail's verdict: None passes, a reason trips, a check that raises trips."""

from __future__ import annotations

import pytest

from covey.tools import guardrails
from covey.tools.guardrails import GuardrailsError, guardrail


@guardrail(on="tool_call")
def no_rm(tool: str, arguments: dict) -> str | None:
    """No deletions."""
    return "rm is not allowed" if "rm" in str(arguments) else None


def test_a_reason_trips_nothing_passes_and_a_check_that_raises_trips():
    assert no_rm.tripped("shell", {"cmd": "ls"}) is None
    assert no_rm.tripped("shell", {"cmd": "rm -rf /"}) == "rm is not allowed"
    assert no_rm.tripped("shell").startswith("the check failed: TypeError")  # an argument missing
    assert (no_rm.name, no_rm.on, no_rm.description) == ("no_rm", "tool_call", "No deletions.")


def test_a_guardrail_is_refused_where_it_cannot_work():
    with pytest.raises(TypeError, match="on='answer'"):
        guardrail(on="answer")(lambda text: None)
    with pytest.raises(TypeError, match="tell_model=True is for tool guardrails"):
        guardrail(on="output", tell_model=True)(lambda text: None)
    with pytest.raises(TypeError, match="must match"):
        guardrail(on="input", name="no good")(lambda text: None)


def test_two_guardrails_of_one_name_clash(monkeypatch):
    monkeypatch.setattr(guardrails, "_served", {})
    guardrails.add([no_rm])
    guardrails.add([no_rm])  # the same one found twice
    other = guardrail(on="input", name="no_rm")(lambda text: None)
    with pytest.raises(GuardrailsError, match="clashes"):
        guardrails.add([other])
    assert guardrails.missing(["no_rm", "nope"]) == ["nope"]
    assert guardrails.of(["no_rm"], "tool_call") == [no_rm] and guardrails.of(["no_rm"], "input") == []
