"""One tool as the worker serves it, whatever it comes from.

Built-ins, a user's decorated functions and an MCP server's tools all become a
``Tool``, so the worker offers, checks, times, caps and records every one the
same way; only ``run`` knows where the work happens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from covey.parts import File, Image

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what OpenAI accepts as a function name
PATTERN = re.compile(r"^[a-zA-Z0-9_*?\[\]!-]{1,64}$")  # a name, or a shell-style pattern of names
DEFAULT_TIMEOUT = 30.0  # seconds per call
DEFAULT_MAX_OUTPUT = 64 * 1024  # bytes of result the model sees; the rest is cut with a note


class WorkspaceView(Protocol):
    """The job's workspace as one agent sees it: it reads everything, writes below its own folder."""

    def read(self, path: str) -> str: ...
    def write(self, path: str, content: str | bytes) -> str: ...
    def list(self, prefix: str = "") -> list[str]: ...
    def own(self, path: str) -> str:
        """The workspace path ``write(path)`` writes (below the agent's own folder)."""
        ...


Output = str | Image | File  # what a tool returns


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know of the call. ``call_id`` is the model's id for the call,
    stable across a redelivered step, so a tool can make itself idempotent."""

    job_id: str
    agent_id: str
    call_id: str
    workspace: WorkspaceView


@dataclass(frozen=True)
class Tool:
    """A tool by name. ``run`` takes arguments already checked against
    ``parameters`` and returns the text the model reads, or an ``Image`` the model
    sees in its next call, or a ``File`` written below the agent's own folder
    (``covey.worker.attachments``); it may raise, and the
    worker hands the model the exception's type and message instead. A tool that
    ``writes`` the workspace runs as its one writer (``Workspace.writing``). One
    that ``needs_approval`` (always, or when the predicate says so of a call's
    arguments) waits for a person's decision before each such call runs."""

    name: str
    origin: str  # where it comes from, for clashes and `covey tools`: "builtin", "function pkg.mod:fn", "mcp files"
    description: str
    parameters: dict[str, Any]  # a JSON schema of type object
    run: Callable[[dict[str, Any], ToolContext], Output]
    timeout: float = DEFAULT_TIMEOUT
    max_output: int = DEFAULT_MAX_OUTPUT
    writes: bool = False
    needs_approval: bool | Callable[[dict[str, Any]], bool] = False

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema a model call offers."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }
