"""The tools this process serves, by name: which an agent is offered, and their schemas.

One registry per process. It starts with the built-ins; a worker fills it at start
(``load``): the ``covey.tools`` entry points, then the ``COVEY_TOOLS`` paths. Other
sources (MCP servers) hand it their ``Tool``s through ``add``. Every name must
match ``covey.tools.tool.NAME`` and be new: a clash is refused naming both origins,
so two packages never silently shadow each other. What the worker serves is what
``served`` returns; a job naming a tool outside it is refused (``check_served``).

A registered object is a ``Tool`` (what ``@covey.tool`` makes), a list of them, or
a module, whose public ``Tool`` attributes are all taken::

    [options.entry_points]
    covey.tools =
        weather = mypkg.tools            # a module: every Tool in it
        lookup = mypkg.tools:lookup      # one Tool (or a list of them)
"""

from __future__ import annotations

import copy
import importlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, overload

from covey import wire
from covey.errors import CoveyError
from covey.tools import builtin, guardrails
from covey.tools.builtin import SPAWN_TOOLS
from covey.tools.function import FunctionTool
from covey.tools.tool import NAME, PATTERN, Tool

ENTRY_POINT_GROUP = "covey.tools"

log = logging.getLogger(__name__)

_served: dict[str, Tool] = {t.name: t for t in builtin.TOOLS}
_loaded = False
_writing = threading.Lock()  # sources add and replace from threads of their own (MCP's loop, its late listings)
_on_change: list[Callable[[], None]] = []  # told once a source's tools changed after the start (the catalog's beat)


class ToolsError(CoveyError, ValueError):
    """A tool that cannot be served: a bad name, a clash, a path that does not import.
    One line naming the tool or the path; the worker stops on it at start."""


class NotServed(CoveyError, LookupError):
    """Tools this process does not serve; ``names`` are those, ``served`` what it does."""

    def __init__(self, names: list[str], served: list[str]) -> None:
        self.names, self.served = names, served
        which = ", ".join(repr(n) for n in names)
        super().__init__(f"tool{'s' if len(names) > 1 else ''} {which} not served here; served: {', '.join(served)}")


def add(tools: Iterable[Tool]) -> None:
    """Serve ``tools`` beside those already served; ``ToolsError`` (and none added)
    for a malformed name or a name already taken, naming both origins."""
    with _writing:
        _served.update(_checked(tools, _served))


def renew(origin: str, tools: Iterable[Tool]) -> None:
    """Serve ``tools`` in place of every tool from ``origin`` (an MCP server whose
    list changed); ``ToolsError``, and nothing replaced, as ``add``. Readers keep the
    registry they had until the new one is whole."""
    global _served
    with _writing:
        kept = {name: t for name, t in _served.items() if t.origin != origin}
        _served = {**kept, **_checked(tools, kept)}
    for told in list(_on_change):
        told()


def on_change(told: Callable[[], None]) -> None:
    """Call ``told`` each time ``renew`` changes what this process serves."""
    _on_change.append(told)


def _checked(tools: Iterable[Tool], served: Mapping[str, Tool]) -> dict[str, Tool]:
    """``tools`` by name, each a well-named ``Tool`` whose name no other of ``served`` takes."""
    seen: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise ToolsError(f"{t!r} is not a covey Tool (decorate a function with @covey.tool)")
        if not NAME.match(t.name):
            raise ToolsError(f"tool {t.name!r} from {t.origin}: a tool name must match {NAME.pattern}")
        other = served.get(t.name) or seen.get(t.name)
        if other is not None and other is not t:
            raise ToolsError(f"tool {t.name!r} from {t.origin} clashes with the one from {other.origin}")
        seen[t.name] = t
    return seen


def served() -> list[Tool]:
    """Every tool this process serves, in the order a call offers them."""
    return list(_served.values())


def get(name: str) -> Tool:
    """The tool served as ``name``; ``NotServed`` otherwise."""
    try:
        return _served[name]
    except KeyError:
        raise NotServed([name], names()) from None


def names() -> list[str]:
    """Every served tool's name, in the order a call offers them."""
    return list(_served)


def schema(name: str) -> dict[str, Any]:
    """The function schema of tool ``name`` (``NotServed`` for one not served)."""
    return get(name).schema()


def check_names(tools: Iterable[str], patterns: bool = False) -> None:
    """``ValueError`` naming every name among ``tools`` that no tool could have (with
    ``patterns``, that no tool's name could match: ``inv__*``). Which tools exist is
    the workers' to say, not the spec's."""
    form = PATTERN if patterns else NAME
    bad = [name for name in tools if not isinstance(name, str) or not form.match(name)]
    if bad:
        what = "tool names or patterns" if patterns else "tool names"
        raise ValueError(f"malformed {what} {bad}: each must match {form.pattern}")


def check_served(tools: Iterable[str]) -> None:
    """``NotServed`` naming every tool (or pattern) among ``tools`` this process does
    not serve (that matches none it serves), listing those it does."""
    missing = [name for name in dict.fromkeys(tools) if not any(wire.matches(t, [name]) for t in _served)]
    if missing:
        raise NotServed(missing, names())


def load(paths: str | None, timeouts: Mapping[str, float] | None = None, mcp: Path | None = None) -> None:
    """Fill the registry at worker start: the ``covey.tools`` entry points, then
    ``paths`` (``COVEY_TOOLS``: comma-separated ``module`` or ``module:object``),
    then the tools of the MCP servers file ``mcp`` (``COVEY_MCP``; a server that
    cannot be used is logged and serves none until a later listing finds it up,
    ``covey.tools.mcp.servers``), then set the ``timeouts``
    (``COVEY_TOOL_TIMEOUTS``) of the tools they name (one of such a server's tools
    gets its timeout when it comes). ``ToolsError`` naming the
    entry point, path, servers file or tool that fails. Once per process: later
    calls do nothing."""
    global _loaded
    if _loaded:
        return
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ENTRY_POINT_GROUP} {ep.name} = {ep.value}"
        try:
            found = ep.load()
        except Exception as e:
            raise ToolsError(f"{where}: cannot load: {type(e).__name__}: {e}") from None
        add(_tools_of(found, where))
    for ep in entry_points(group=guardrails.ENTRY_POINT_GROUP):
        where = f"entry point {guardrails.ENTRY_POINT_GROUP} {ep.name} = {ep.value}"
        try:
            guardrails.add(guardrails.found_in(ep.load()))
        except Exception as e:
            raise ToolsError(f"{where}: cannot load: {type(e).__name__}: {e}") from None
    for path in (p.strip() for p in (paths or "").split(",")):
        if path:
            found = _imported(path)
            guards = guardrails.found_in(found)  # a module of tools may hold guardrails too, or only them
            try:
                guardrails.add(guards)
            except guardrails.GuardrailsError as e:
                raise ToolsError(f"COVEY_TOOLS {path}: {e}") from None
            add(_tools_of(found, f"COVEY_TOOLS {path}", required=not guards))
    timeouts = dict(timeouts or {})
    later: list[str] = []  # name prefixes of the MCP servers down now, whose tools come later
    if mcp is not None:
        tools, later = _mcp_tools(
            mcp,
            late=lambda tools: add(_late(tools, timeouts, later)),
            changed=lambda origin, tools: renew(origin, _timed(tools, timeouts)),
        )
        add(tools)
    for name, seconds in timeouts.items():
        if name in _served:
            _served[name] = _retimed(_served[name], seconds)
        elif not name.startswith(tuple(later)):
            raise ToolsError(f"COVEY_TOOL_TIMEOUTS: no tool {name!r} is served; served: {', '.join(names())}")
    _loaded = True


def _retimed(found: Tool, seconds: float) -> Tool:
    return found.retimed(seconds) if isinstance(found, FunctionTool) else replace(found, timeout=seconds)


def _late(tools: list[Tool], timeouts: Mapping[str, float], later: list[str]) -> list[Tool]:
    """The tools of MCP servers that came up after the start, with the timeouts
    (``COVEY_TOOL_TIMEOUTS``) that waited for them; a timeout naming a tool such a
    server does not serve is logged, as the worker runs already."""
    arrived = {t.name for t in tools}
    up = [prefix for prefix in later if any(name.startswith(prefix) for name in arrived)]
    for name in timeouts:
        if name not in arrived and name.startswith(tuple(up)):
            log.error("COVEY_TOOL_TIMEOUTS: no tool %r is served by its MCP server, up now; it is ignored", name)
    return _timed(tools, timeouts)


def _timed(tools: list[Tool], timeouts: Mapping[str, float]) -> list[Tool]:
    """The tools, each with its ``COVEY_TOOL_TIMEOUTS`` entry where it has one."""
    return [_retimed(t, timeouts[t.name]) if t.name in timeouts else t for t in tools]


def _mcp_tools(
    path: Path, late: Callable[[list[Tool]], None], changed: Callable[[str, list[Tool]], None]
) -> tuple[list[Tool], list[str]]:
    """The MCP servers' tools and the name prefixes of those down now
    (``covey.tools.mcp.mcp_tools``); the SDK is imported only by a worker that has servers."""
    from covey.tools.mcp import McpFileError, mcp_tools

    try:
        return mcp_tools(path, late=late, changed=changed)
    except McpFileError as e:
        raise ToolsError(str(e)) from None


def _imported(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as e:
        raise ToolsError(f"COVEY_TOOLS: cannot import {path!r}: {type(e).__name__}: {e}") from None
    for part in filter(None, attr.split(".")):
        if not hasattr(found, part):
            raise ToolsError(f"COVEY_TOOLS: {path!r}: module {module_name!r} has no {attr!r}")
        found = getattr(found, part)
    return found


def _tools_of(found: Any, where: str, required: bool = True) -> list[Tool]:
    """The tools ``found`` (a tool, a module, a list of them) holds; a ``ToolsError``
    for anything else, or a module holding none, when tools are ``required`` (a
    module of guardrails alone holds none)."""
    if isinstance(found, Tool):
        return [found]
    if isinstance(found, ModuleType):
        tools = [v for k, v in vars(found).items() if isinstance(v, Tool) and not k.startswith("_")]
        if not tools and required:
            raise ToolsError(f"{where}: module {found.__name__} holds no covey Tool")
        return tools
    if isinstance(found, (list, tuple)) and all(isinstance(t, Tool) or not required for t in found):
        return [t for t in found if isinstance(t, Tool)]
    if not required:
        return []
    raise ToolsError(f"{where}: {found!r} is not a covey Tool (decorate a function with @covey.tool)")


@overload
def narrow(tools: list[str], allow: list[str] | None) -> list[str]: ...
@overload
def narrow(tools: list[str] | None, allow: list[str] | None) -> list[str] | None: ...
def narrow(tools: list[str] | None, allow: list[str] | None) -> list[str] | None:
    """The ``tools`` that ``allow`` (names or patterns) lets through, in their order.
    None, on either side, means every tool: only where both are None is the answer None."""
    if allow is None:
        return tools
    if tools is None:
        return list(allow)
    return [name for name in tools if wire.matches(name, allow)]


DEFAULT_TOOLS: tuple[str, ...] = tuple(t.name for t in builtin.TOOLS)
"""What an agent whose spec names no tools is offered: covey's built-ins, never what
a worker adds (functions, MCP servers). Each offered tool's schema is in every
prompt, and a worker's tools grow with the deployment, not with the job: a job
names the ones it needs (``weather__*``, or ``*`` for every served tool)."""


def offered(allow: list[str] | None, deny: list[str]) -> list[str]:
    """Tool names an agent sees: those its allow list names (``DEFAULT_TOOLS`` when
    unset) that this process serves, minus every deny rule (names or patterns, either side)."""
    allowed = list(DEFAULT_TOOLS) if allow is None else allow
    return [name for name in narrow(names(), allowed) if not wire.matches(name, deny)]


def schemas(tools: list[str], agents_left: int | None) -> list[dict[str, Any]]:
    """The function schemas of ``tools`` for one call. The spawn tools say how many
    sub-agents this agent may still open (``agents_left``; None: no cap), so the
    model plans within the cap instead of learning it from refusals."""
    out = []
    for name in tools:
        found = schema(name)
        if name in SPAWN_TOOLS and agents_left is not None:
            found = copy.deepcopy(found)
            function = found["function"]
            function["description"] += f" This agent may open {agents_left} more sub-agent(s)."
            if name == "spawn_agents":
                function["parameters"]["properties"]["agents"]["maxItems"] = agents_left
        out.append(found)
    return out
