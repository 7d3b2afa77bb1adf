"""A tool call's arguments checked against the tool's JSON schema before it runs.

The model (or a model-written plan) writes the arguments, so they are untrusted:
whatever shape they take, a bad one becomes one line the caller hands back as the
tool's result, never an exception inside the tool.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from covey.tools.tool import Tool
from covey.wire import cut

MESSAGE_CHARS = 200  # a bad value is quoted in the line; a 10 MB one is not


class BadArguments(ValueError):
    """Arguments a tool cannot take: not JSON, not an object, or off its schema."""


def parse(tool: Tool, arguments: str | None) -> dict[str, Any]:
    """The arguments of a call to ``tool`` as an object its schema allows
    (no arguments at all count as ``{}``); ``BadArguments`` naming what is wrong."""
    name = tool.name
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        raise BadArguments(f"tool {name!r}: arguments are not JSON: {e}") from None
    error = best_match(_validator(tool).iter_errors(args))
    if error is not None:
        raise BadArguments(f"tool {name!r}: {_said(error)}")
    return args


_validators: dict[str, tuple[dict[str, Any], Draft202012Validator]] = {}


def _validator(tool: Tool) -> Draft202012Validator:
    """One validator per tool, built at its first call (a schema is checked once)."""
    kept = _validators.get(tool.name)
    if kept is None or kept[0] is not tool.parameters:
        kept = _validators[tool.name] = (tool.parameters, Draft202012Validator(tool.parameters))
    return kept[1]


def _said(error: ValidationError) -> str:
    if error.validator == "type" and not error.absolute_path:
        return f"arguments must be a JSON object, not {type(error.instance).__name__}"
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    text = cut(error.message, MESSAGE_CHARS)
    return f"argument {where}: {text}" if where else text
