"""Structured output for the sim: a JSON value valid against a ``response_format`` schema.

Built from the schema alone plus the conversation's answers, so the same request
always gets the same document, and a worker's schema check sees real-shaped data:

- ``const`` -> the const; ``enum`` -> its first value
- ``$ref`` (``#/$defs/...``, as the SDK sends for nested pydantic models) -> the
  referred schema; ``anyOf``/``oneOf`` -> the first alternative
- object -> every property; array -> ``minItems`` items (one when not given)
- string -> the text answer; boolean -> true
- number/integer -> the arithmetic result when there is one of that type, else
  ``fraction`` (a number) or 1 (an integer); clamped to ``minimum``/``maximum``
- anything else, and a ``$ref`` back into a schema it is inside of -> null
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Answers", "instance"]


@dataclass(frozen=True)
class Answers:
    """The scalars an instance is made of."""

    text: str
    number: int | float | None  # the "What is A op B?" result, when the task asks one
    fraction: float  # in [0, 1], from a digest of the task: the number when there is none


def instance(schema: Any, answers: Answers) -> Any:
    """A value valid against ``schema`` (see module docs), built the same way every time."""
    return _build(schema, answers, schema, frozenset())


def _build(schema: Any, answers: Answers, root: Any, inside: frozenset[str]) -> Any:
    """``instance`` of a subschema; ``inside`` holds the ``$ref``s being expanded, so a
    recursive schema ends instead of recursing forever."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return None if ref in inside else _build(_resolve(root, ref), answers, root, inside | {ref})
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if alternatives:
        return _build(alternatives[0], answers, root, inside)
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first type
        kind = kind[0] if kind else None
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _build(sub, answers, root, inside) for name, sub in properties.items()}
    if kind == "array":
        return [_build(schema.get("items"), answers, root, inside) for _ in range(schema.get("minItems", 1))]
    if kind == "string":
        return answers.text
    if kind in ("number", "integer"):
        return _number(schema, kind == "integer", answers)
    if kind == "boolean":
        return True
    return None


def _number(schema: dict[str, Any], integral: bool, answers: Answers) -> int | float:
    """The arithmetic result if it has the schema's type, else the fallback, then clamped."""
    value = answers.number
    if value is None or (integral and isinstance(value, float) and not value.is_integer()):
        value = 1 if integral else answers.fraction
    if isinstance(schema.get("minimum"), (int, float)):
        value = max(value, math.ceil(schema["minimum"]) if integral else schema["minimum"])
    if isinstance(schema.get("maximum"), (int, float)):
        value = min(value, math.floor(schema["maximum"]) if integral else schema["maximum"])
    return int(value) if integral else value


def _resolve(root: Any, ref: str) -> Any:
    """The subschema a local ``$ref`` (``#/a/b``) points at; ``None`` when it points nowhere."""
    if not ref.startswith("#"):
        return None
    node = root
    for key in filter(None, ref[1:].split("/")):
        key = key.replace("~1", "/").replace("~0", "~")
        node = node.get(key) if isinstance(node, dict) else None
    return node
