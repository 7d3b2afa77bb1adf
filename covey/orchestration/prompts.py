"""The opening messages every strategy starts a conversation with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from covey import wire
from covey.context import RunContext
from covey.parts import FilePart

FILES_NOTE = "Files given with the task, in the job's workspace (read them with read_file): {}"

if TYPE_CHECKING:
    from covey.spec import AgentSpec


def opening(spec: AgentSpec, ctx: RunContext) -> list[dict[str, Any]]:
    """The system message (role, depth, instructions), the conversation so far (a
    session's), and the task. The system message says how many messages come before
    the task, so a model (and the sim) tells the conversation from the new task."""
    system = f"You are {spec.role}, an agent of covey at depth {ctx.depth}. {spec.instructions}".strip()
    if spec.history:
        system += f" {wire.HISTORY.format(len(spec.history))}"
    before = [said.model_dump() for said in spec.history]
    return [{"role": "system", "content": system}, *before, {"role": "user", "content": task(spec)}]


def task(spec: AgentSpec) -> str | list[dict[str, Any]]:
    """The task as the model reads it: its text, or content parts when it has images
    and files, its images as they were given and a note of the files, which the
    worker put into the workspace before the agent ran."""
    if not spec.parts:
        return spec.task
    content: list[dict[str, Any]] = [{"type": "text", "text": spec.task}]
    files = []
    for part in spec.parts:
        if isinstance(part, FilePart):
            files.append(f"{part.file.filename} ({len(part.file.content())} bytes)")
        else:
            content.append(part.model_dump(exclude_none=True))
    if files:
        content.append({"type": "text", "text": FILES_NOTE.format(", ".join(files))})
    return content
