"""JSON answers: the ``response_format`` a call sends and the check of what comes back.

A model asked for a schema may still answer something else (a weak model, an
endpoint without strict mode, a reply cut short), so every reply is parsed and
validated here; a mismatch is a ``SchemaMismatch`` naming where, never a crash.

A schema that fits OpenAI's strict mode (``strict_problems`` finds nothing: every
object lists all its properties as required and allows no others, and only the
keywords strict mode supports appear) is sent with ``strict: true``, so an
endpoint that enforces it never answers off-schema; any other schema is sent
without it, since a strict endpoint would refuse the request.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from covey.errors import CoveyError

SCHEMA_NAME = "answer"  # the default name of a json_schema response_format (OpenAI requires one)

# The keywords OpenAI's strict structured outputs accept; any other is refused there.
STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
        "$ref", "$defs", "definitions", "description", "title", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "pattern", "format",
    }
)  # fmt: skip


class SchemaMismatch(CoveyError, ValueError):
    """A reply that is not JSON or does not match the schema asked for."""


class InvalidSchema(CoveyError, ValueError):
    """A schema that is not a valid JSON Schema."""


def check_schema(schema: dict[str, Any]) -> None:
    try:
        validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        raise InvalidSchema(f"not a valid JSON Schema: {e.message}") from None


def strict_problems(schema: dict[str, Any]) -> list[str]:
    """Why ``schema`` does not fit OpenAI's strict mode, each naming where; empty when it fits."""
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append("the top level: strict mode needs an object")
    _strict(schema, "#", problems)
    return problems


def _strict(node: Any, where: str, problems: list[str]) -> None:
    if not isinstance(node, dict):
        return
    problems.extend(f"{where}: {key!r} is not supported" for key in node if key not in STRICT_KEYWORDS)
    kinds = node.get("type")
    if kinds == "object" or (isinstance(kinds, list) and "object" in kinds):
        properties = node.get("properties") or {}
        if node.get("additionalProperties") is not False:
            problems.append(f"{where}: additionalProperties must be false")
        if sorted(node.get("required") or []) != sorted(properties):
            problems.append(f"{where}: every property must be required")
        for name, sub in properties.items():
            _strict(sub, f"{where}/properties/{name}", problems)
    if "items" in node:
        _strict(node["items"], f"{where}/items", problems)
    for i, sub in enumerate(node.get("anyOf") or []):
        _strict(sub, f"{where}/anyOf/{i}", problems)
    for defs in ("$defs", "definitions"):
        for name, sub in (node.get(defs) or {}).items():
            _strict(sub, f"{where}/{defs}/{name}", problems)


def response_format(schema: dict[str, Any], name: str = SCHEMA_NAME) -> dict[str, Any]:
    """A ``json_schema`` response_format, strict when the schema fits strict mode."""
    spec: dict[str, Any] = {"name": name, "schema": schema}
    if not strict_problems(schema):
        spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


def parse(content: str | None, schema: dict[str, Any]) -> Any:
    """The reply's JSON value, checked against ``schema``."""
    try:
        value = json.loads(content or "")
    except ValueError as e:
        raise SchemaMismatch(f"model reply is not JSON: {e}") from None
    error = jsonschema.exceptions.best_match(validator_for(schema)(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise SchemaMismatch(f"model reply does not match the schema at {where}: {error.message}")
    return value
