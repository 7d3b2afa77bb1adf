"""One tool call of an agent, run in the worker (control tools are Actions instead).

A call never raises: arguments off the tool's schema, an exception the tool
raises or its timeout become text the model reads (the exception's type and
message, redacted, never a traceback), so it can try again another way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from covey.agents.loading import AgentNotFound
from covey.context import RunContext
from covey.models.replies import ToolCall
from covey.spec import AgentSpec
from covey.store.workspace import Workspace
from covey.tools import arguments, policy, registry
from covey.tools.builtin import CONTROL_TOOLS
from covey.tools.tool import Tool, ToolContext
from covey.worker import attachments
from covey.worker.redaction import redact

MAX_ERROR_CHARS = 2000  # of an exception's message; a tool may raise with a huge one
WRITER_GRACE_SECONDS = 5.0  # a writer's hold outlasts its tool's timeout by this much


@dataclass(frozen=True)
class AgentWorkspace:
    """The job's workspace as one agent sees it (``covey.tools.tool.WorkspaceView``):
    it reads every file and writes only below its own folder."""

    workspace: Workspace
    subroot: str

    def read(self, path: str) -> str:
        return self.workspace.read(path)

    def write(self, path: str, content: str | bytes) -> str:
        return self.workspace.write(self.subroot, path, content)

    def list(self, prefix: str = "") -> list[str]:
        return [name for name in self.workspace.files() if name.startswith(prefix)]

    def own(self, path: str) -> str:
        return self.workspace.own(self.subroot, path)


def brought(spec: AgentSpec) -> Mapping[str, Tool]:
    """The tools an agent of another framework brings with it (an Agents SDK agent's
    function tools, ``covey.agents.brought``), by name; none for covey's own strategies."""
    if spec.agent is None:
        return {}
    from covey.agents.brought import brought as of  # the framework, where such an agent runs

    try:
        return of(spec.agent).tools
    except AgentNotFound:  # its strategy has ended it already, saying why
        return {}


def run_tool(
    call: ToolCall,
    ctx: RunContext,
    workspace: Workspace,
    seconds_left: float | None = None,
    own: Mapping[str, Tool] | None = None,
) -> str:
    """Run one tool call (of ``own``, the tools its agent brought, or the registry's);
    the text returned is what the model sees. Its arguments are
    checked against the tool's schema first, so a tool only ever gets the fields it
    declares, of their declared types. It gets no longer than its timeout, nor than
    ``seconds_left`` before the agent's nearest deadline, waiting for the
    workspace's writer included when it writes. An image or a file it returns is
    kept in the workspace and named in the text (``covey.worker.attachments``)."""
    tool = (own or {}).get(call.name)
    if tool is None and (call.name in CONTROL_TOOLS or call.name not in registry.names()):
        return f"error: tool {call.name!r} does not run in the worker"
    tool = tool or registry.get(call.name)
    started = time.monotonic()
    try:
        args = arguments.parse(tool, call.arguments)
    except arguments.BadArguments as e:
        return f"error: {e}"
    view = AgentWorkspace(workspace, ctx.subroot)
    context = ToolContext(ctx.job_id, ctx.agent_id, call.id, view)
    try:
        if not tool.writes:
            return attachments.stored(policy.run(tool, args, context, seconds_left), view, call.id)
        bound = tool.timeout if seconds_left is None else min(tool.timeout, seconds_left)
        with workspace.writing(wait=bound, hold=tool.timeout + WRITER_GRACE_SECONDS):
            left = None if seconds_left is None else max(0.001, seconds_left - (time.monotonic() - started))
            return attachments.stored(policy.run(tool, args, context, left), view, call.id)
    except Exception as e:
        message = redact(str(e))[:MAX_ERROR_CHARS]
        return f"error: {type(e).__name__}: {message}" if message else f"error: {type(e).__name__}"
