"""``AgentResult.output_as``: a typed answer back as its type, from JSON on the wire."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from covey.results import AgentResult


class Summary(BaseModel):
    order_id: str
    status: str


def result(**fields) -> AgentResult:
    return AgentResult.model_validate({"status": "completed", "job_id": "j", "agent_id": "root", **fields})


def test_a_structured_answer_comes_back_as_its_type_from_data_or_from_json_output():
    wire = result(data={"order_id": "A1", "status": "shipped"}).model_dump(mode="json")
    assert AgentResult.model_validate(wire).output_as(Summary) == Summary(order_id="A1", status="shipped")
    assert result(output='{"order_id": "B2", "status": "late"}').output_as(Summary).status == "late"
    assert result(output="[1, 2]").output_as(list[int]) == [1, 2]


def test_an_answer_that_does_not_fit_the_type_or_is_missing_is_refused():
    with pytest.raises(ValidationError):
        result(data={"order_id": "A1"}).output_as(Summary)
    with pytest.raises(ValueError, match="ended failed with no output"):
        AgentResult.model_validate({"status": "failed", "job_id": "j", "agent_id": "root"}).output_as(Summary)
