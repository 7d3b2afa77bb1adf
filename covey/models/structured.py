"""JSON answers: the ``response_format`` a call sends and the check of what comes back.

A model asked for a schema may still answer something else (a weak model, an
endpoint without strict mode, a reply cut short), so every reply is parsed and
validated here; a mismatch is a ``SchemaMismatch`` naming where, never a crash.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from covey.errors import CoveyError

SCHEMA_NAME = "answer"  # the default name of a json_schema response_format (OpenAI requires one)


class SchemaMismatch(CoveyError, ValueError):
    """A reply that is not JSON or does not match the schema asked for."""


class InvalidSchema(CoveyError, ValueError):
    """A schema that is not a valid JSON Schema."""


def check_schema(schema: dict[str, Any]) -> None:
    try:
        validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        raise InvalidSchema(f"not a valid JSON Schema: {e.message}") from None


def response_format(schema: dict[str, Any], name: str = SCHEMA_NAME) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


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
