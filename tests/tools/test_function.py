"""``@covey.tool``: the schema a model is offered, and the text it reads back."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel

from covey import Tool, ToolContext, tool
from covey.tools.function import strict


class Point(BaseModel):
    x: int
    y: int


def context() -> ToolContext:
    return ToolContext(job_id="j", agent_id="root", call_id="call_1", workspace=None)  # type: ignore[arg-type]


@tool
def move(point: Point, by: int = 1, unit: Literal["m", "km"] = "m") -> Point:
    """Move a point right.

    Args:
        point: where it starts
        by: how far, in units,
            never negative
        unit: the unit of ``by``
    """
    return Point(x=point.x + by, y=point.y)


def test_the_schema_comes_from_the_signature_and_docstring_and_is_strict():
    assert isinstance(move, Tool) and move.origin == f"function {__name__}:move"
    assert move.description == "Move a point right."
    params = move.parameters
    assert params["required"] == ["point", "by", "unit"]  # strict mode: every property, defaults or not
    assert params["additionalProperties"] is False
    assert params["properties"]["by"] == {"type": "integer", "description": "how far, in units, never negative"}
    assert params["properties"]["unit"]["enum"] == ["m", "km"]
    assert params["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert "title" not in str(params) and "default" not in str(params)


def test_a_call_gets_validated_values_and_its_return_value_as_json():
    assert move.run({"point": {"x": 1, "y": 2}, "by": 3, "unit": "m"}, context()) == '{"x":4,"y":2}'
    assert move(Point(x=0, y=0), 2) == Point(x=2, y=0)  # still the function it was


@pytest.mark.parametrize(
    "returned, text",
    [("as is", "as is"), ({"a": [1, 2]}, '{"a":[1,2]}'), ([1, "b"], '[1,"b"]'), (None, "null"), (7, "7")],
)
def test_return_values_become_text(returned, text):
    @tool
    def give() -> object:
        """Give it back."""
        return returned

    assert give.run({}, context()) == text


def test_a_tool_context_parameter_is_passed_not_offered():
    @tool(name="who-called", timeout=5, max_output=100)
    def who(ctx: ToolContext, greeting: str) -> str:
        """:param greeting: what to say"""
        return f"{greeting} {ctx.agent_id} {ctx.call_id}"

    assert (who.name, who.timeout, who.max_output) == ("who-called", 5, 100)
    assert list(who.parameters["properties"]) == ["greeting"]
    assert who.parameters["properties"]["greeting"]["description"] == "what to say"
    assert who.run({"greeting": "hi"}, context()) == "hi root call_1"


def test_an_async_tool_runs_to_its_result_and_is_cancelled_at_its_timeout():
    @tool(timeout=0.05)
    async def nap(seconds: float) -> str:
        """Sleep."""
        await asyncio.sleep(seconds)
        return "rested"

    assert nap.run({"seconds": 0}, context()) == "rested"
    with pytest.raises(TimeoutError):
        nap.run({"seconds": 60}, context())


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda: tool(name="echo")(lambda x: x), "parameter 'x' has no type hint"),
        (lambda: tool(name="two words")(lambda: None), "tool name 'two words' must match"),
        (lambda: tool(name="nap", timeout=0)(lambda: None), "must be positive"),
    ],
)
def test_a_function_covey_cannot_describe_is_refused_when_decorated(make, said):
    with pytest.raises(TypeError, match=said):
        make()


def test_variadic_parameters_are_refused():
    def anything(*args: int) -> int:
        return sum(args)

    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs"):
        tool(anything)


def test_strict_leaves_a_mapping_open_and_closes_every_object():
    mapping = {"type": "object", "additionalProperties": {"type": "integer"}}
    schema = strict({"type": "object", "properties": {"m": mapping}})
    assert schema["required"] == ["m"] and schema["additionalProperties"] is False
    assert schema["properties"]["m"] == mapping


def test_a_tool_that_writes_says_so_and_keeps_saying_so_retimed():
    @tool(writes=True)
    def save(text: str) -> str:
        return text

    assert save.writes and save.retimed(5).writes
    assert not tool(plain).writes


def plain(x: int) -> int:
    return x
