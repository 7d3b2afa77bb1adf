"""JSON answers: the ``response_format`` a call sends and the check of what comes back.

A model asked for a schema may still answer something else (a weak model, an
endpoint without strict mode, a reply cut short), so every reply is parsed and
validated here; a mismatch is a ``SchemaMismatch`` naming where, never a crash.

How the schema is asked for is the endpoint's structured mode (``asking``):
``json_schema`` (the default) sends it as the ``response_format``; ``json_object``,
for endpoints without JSON schema support, asks for a JSON object and shows the
schema in a last system message; ``json_object_schema`` sends the schema inside a
``json_object`` response_format, where llama-cpp-python's server (which refuses
``json_schema``) turns it into a grammar the reply cannot leave, so the model is
not shown it (a small model copies a schema it reads, and reads it at the cost of
its prompt); ``tools``, for endpoints with function calling alone, offers one
more function named after the schema whose arguments are the answer
(``answered`` turns that call back into the reply's content).

A schema that fits OpenAI's strict mode is sent with ``strict: true``, so an
endpoint that enforces it never answers off-schema: every object lists all its
properties as required and allows no others, and only the keywords strict mode
supports appear, except the length bounds of strings, which strict mode refuses
and which a strict request goes without (``strict_form``); ``parse`` still holds
the reply to them. Any other schema is sent as it is, without ``strict``, since a
strict endpoint would refuse the request.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Literal

from covey.errors import CoveyError
from covey.models.replies import ModelReply

StructuredMode = Literal["json_schema", "json_object", "json_object_schema", "tools"]

SCHEMA_NAME = "answer"  # the default name of a json_schema response_format (OpenAI requires one)

# The keywords OpenAI's strict structured outputs accept; any other is refused there.
STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
        "$ref", "$defs", "definitions", "description", "title", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "pattern", "format",
    }
)  # fmt: skip
# Keywords strict mode refuses that only narrow a string: left out of a strict request.
LENGTH_KEYWORDS = frozenset({"minLength", "maxLength"})


class SchemaMismatch(CoveyError, ValueError):
    """A reply that is not JSON or does not match the schema asked for."""


class InvalidSchema(CoveyError, ValueError):
    """A schema that is not a valid JSON Schema."""


def check_schema(schema: dict[str, Any]) -> None:
    import jsonschema  # here, not at the top: it costs `import covey` (every command's start) 40 ms
    from jsonschema.validators import validator_for

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


def strict_form(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` as a strict request sends it (its string length bounds left out), or
    None when it does not fit strict mode even so."""
    loose = _unbounded(schema)
    return None if strict_problems(loose) else loose


def _unbounded(node: Any) -> Any:
    """``node`` without ``LENGTH_KEYWORDS`` in it or any subschema (a property named
    ``maxLength`` is kept: only subschemas are walked)."""
    if not isinstance(node, dict):
        return node
    out = {key: value for key, value in node.items() if key not in LENGTH_KEYWORDS}
    for key in ("properties", "$defs", "definitions"):
        if isinstance(node.get(key), dict):
            out[key] = {name: _unbounded(sub) for name, sub in node[key].items()}
    if "items" in node:
        out["items"] = _unbounded(node["items"])
    if isinstance(node.get("anyOf"), list):
        out["anyOf"] = [_unbounded(sub) for sub in node["anyOf"]]
    return out


def response_format(schema: dict[str, Any], name: str = SCHEMA_NAME) -> dict[str, Any]:
    """A ``json_schema`` response_format, strict when the schema fits strict mode."""
    strict = strict_form(schema)
    spec: dict[str, Any] = {"name": name, "schema": schema if strict is None else strict}
    if strict is not None:
        spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


def asking(
    mode: StructuredMode, schema: dict[str, Any], name: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """The messages, tools and further request keywords that ask for ``schema`` in ``mode``."""
    if mode == "json_schema":
        return messages, tools, {"response_format": response_format(schema, name)}
    if mode == "json_object":
        note = f"Answer with one JSON object that matches this JSON Schema, and nothing else: {json.dumps(schema)}"
        return [*messages, {"role": "system", "content": note}], tools, {"response_format": {"type": "json_object"}}
    if mode == "json_object_schema":
        return messages, tools, {"response_format": {"type": "json_object", "schema": schema}}
    strict = strict_form(schema)
    function: dict[str, Any] = {
        "name": name,
        "description": "Give your final answer as this function's arguments.",
        "parameters": schema if strict is None else strict,
    }
    if strict is not None:
        function["strict"] = True
    # Alone, the answer is forced; beside the agent's own tools, some call is.
    choice: Any = "required" if tools else {"type": "function", "function": {"name": name}}
    return messages, [*tools, {"type": "function", "function": function}], {"tool_choice": choice}


def answered(mode: StructuredMode, name: str, reply: ModelReply) -> ModelReply:
    """The reply with a ``tools``-mode answer call turned into its content."""
    if mode != "tools":
        return reply
    answer = next((call for call in reply.tool_calls if call.name == name), None)
    if answer is None:
        return reply
    finish = "stop" if reply.finish_reason == "tool_calls" else reply.finish_reason
    return replace(reply, content=answer.arguments, tool_calls=[], finish_reason=finish)


def parse(content: str | None, schema: dict[str, Any]) -> Any:
    """The reply's JSON value, checked against ``schema``. A raw control character
    inside a string (a newline), which llama.cpp's grammar for JSON strings lets
    through, is read as the character it is."""
    import jsonschema
    from jsonschema.validators import validator_for

    try:
        value = json.loads(content or "", strict=False)
    except ValueError as e:
        raise SchemaMismatch(f"model reply is not JSON: {e}") from None
    error = jsonschema.exceptions.best_match(validator_for(schema)(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise SchemaMismatch(f"model reply does not match the schema at {where}: {error.message}")
    return value
