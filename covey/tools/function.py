"""``@tool``: a typed Python function as a ``Tool``, its schema read from its signature.

The JSON schema comes from the type hints through pydantic, with each parameter's
description taken from the docstring's ``Args:`` section (or ``:param x:`` lines),
and is made strict-mode compatible: every property required, no others allowed.
A parameter annotated ``ToolContext`` is not in the schema: the worker passes the
call's context there. An ``async def`` runs to completion (cancelled at its
timeout) in the thread the worker gives the call.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, create_model

from covey.parts import File, Image
from covey.tools.tool import DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT, NAME, Output, Tool, ToolContext

_SPHINX_PARAM = re.compile(r"^:param\s+(?:\S+\s+)?(\w+):\s*(.*)$")
_GOOGLE_PARAM = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?)\s*:\s*$")


@dataclass(frozen=True)
class FunctionTool(Tool):
    """A ``Tool`` made from a function, which stays callable as the function itself."""

    function: Callable[..., Any] = field(default=lambda: None, repr=False, compare=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def retimed(self, timeout: float) -> FunctionTool:
        """The same tool under another timeout (an async one is cancelled at it)."""
        return _function_tool(
            self.function, self.name, self.description, timeout, self.max_output, self.writes, self.needs_approval
        )


@typing.overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...
@typing.overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    writes: bool = False,
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    writes: bool = False,
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make ``fn`` a tool: ``@tool`` or ``@tool(name=..., timeout=..., max_output=..., writes=...)``.

    ``timeout`` is seconds per call, ``max_output`` the bytes of its result the model
    reads (the rest is cut with a note); ``writes=True`` for a tool that changes the
    job's workspace, which then runs as its one writer; ``needs_approval=True`` (or a
    predicate of a call's arguments, as the model sent them) for a tool whose calls
    wait for a person's decision (``covey approve``). ``TypeError`` for a function covey cannot
    describe: a parameter without a type hint, ``*args``/``**kwargs``, a bad name."""

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return _function_tool(f, name, description, timeout, max_output, writes, needs_approval)

    return wrap(fn) if fn is not None else wrap


def _function_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    timeout: float,
    max_output: int,
    writes: bool = False,
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False,
) -> FunctionTool:
    name = name or fn.__name__
    origin = f"function {fn.__module__}:{fn.__qualname__}"
    if not NAME.match(name):
        raise TypeError(f"{origin}: tool name {name!r} must match {NAME.pattern}")
    if timeout <= 0 or max_output < 1:
        raise TypeError(f"{origin}: timeout and max_output must be positive")
    summary, documented = _docstring(inspect.getdoc(fn) or "")
    hints = typing.get_type_hints(fn)
    fields: dict[str, Any] = {}
    context: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{origin}: *args and **kwargs cannot be described to a model")
        hint = hints.get(param.name)
        if hint is ToolContext:
            context = param.name
            continue
        if hint is None:
            raise TypeError(f"{origin}: parameter {param.name!r} has no type hint")
        # Strict mode: the model sends every property, so a default is never used.
        fields[param.name] = (hint, Field(description=documented.get(param.name)))
    args_model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)

    def run(args: dict[str, Any], ctx: ToolContext) -> Output:
        checked = args_model.model_validate(args)
        kwargs = {n: getattr(checked, n) for n in fields}
        if context is not None:
            kwargs[context] = ctx
        result = fn(**kwargs)
        if inspect.isawaitable(result):
            result = asyncio.run(_bounded(result, timeout))
        return as_text(result)

    return FunctionTool(
        name=name,
        origin=origin,
        description=description or summary,
        parameters=strict(args_model.model_json_schema()),
        run=run,
        timeout=timeout,
        max_output=max_output,
        writes=writes,
        needs_approval=needs_approval,
        function=fn,
    )


async def _bounded(awaitable: Any, timeout: float) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


def as_text(result: Any) -> Output:
    """What the model reads of a return value: a str as it is, an ``Image`` or
    ``File`` for the worker to keep and show, anything else as JSON (pydantic
    models, dicts, lists, numbers, None)."""
    if isinstance(result, str | Image | File):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return pydantic_core.to_json(result).decode()


def strict(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as OpenAI's strict mode takes it: every object's properties all
    required and no others allowed; titles and defaults (never used) dropped."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("title", "default"):
            continue
        if key in ("properties", "$defs"):
            out[key] = {n: strict(s) for n, s in value.items()}
        elif key in ("items", "not") and isinstance(value, dict):
            out[key] = strict(value)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [strict(s) for s in value]
        else:
            out[key] = value
    if out.get("type") == "object" and not isinstance(out.get("additionalProperties"), dict):
        out.setdefault("properties", {})
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The docstring's first paragraph, and each parameter's description from an
    ``Args:`` section (Google style) or ``:param name:`` lines (Sphinx style)."""
    first = doc.split("\n\n", 1)[0]
    summary = "" if _SECTION.match(first.strip()) or first.startswith(":") else " ".join(first.split())
    params: dict[str, str] = {}
    in_args, indent, last = False, None, None
    for raw in doc.splitlines():
        line = raw.strip()
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            params[sphinx[1]] = sphinx[2]
            continue
        section = _SECTION.match(raw)  # a section header is not indented
        if section:
            in_args, indent, last = section[1] in ("Args", "Arguments", "Parameters"), None, None
            continue
        if not in_args or not line:
            continue
        depth = len(raw) - len(raw.lstrip())
        google = _GOOGLE_PARAM.match(line)
        if google and (indent is None or depth == indent):
            indent, last = depth, google[1]
            params[last] = google[2]
        elif last is not None and indent is not None and depth > indent:
            params[last] = f"{params[last]} {line}"
    return summary, params
