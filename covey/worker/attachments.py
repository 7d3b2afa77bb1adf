"""Images and files between a job's workspace, its tools and its model calls.

A task's files go into the workspace before its root runs. A tool's ``Image`` or
``File`` is written below the agent's own folder, and the model reads a line
naming it; each ``[image: <path or URL>]`` line of a tool's text becomes an image
part of the next model call. The line is what the ledger records, so a replayed
step shows the same image, read from the workspace again; only an image file or
an http(s) URL is ever shown.
"""

from __future__ import annotations

from typing import Any

from covey import parts
from covey.parts import IMAGE_LINE, IMAGE_LINES, File, FilePart
from covey.store.workspace import Workspace, WorkspaceError
from covey.tools.tool import Output, WorkspaceView

SHOWN = "The images the tools returned:"


def given(workspace: Workspace, files: list[Any]) -> None:
    """Put a task's file parts into the workspace, each where it names; a path the
    workspace holds already (a redelivered start, a file put before) is left as it is."""
    for part in files:
        if isinstance(part, FilePart):
            workspace.write("", part.file.filename, part.file.content(), keep=True)


def stored(output: Output, workspace: WorkspaceView, call_id: str) -> str:
    """What the model reads of a tool's output: text as it is; an ``Image`` kept
    under ``images/`` in the agent's folder (its URL as given) and named on an
    image line; a ``File`` written and named. ``WorkspaceError`` when it does not fit."""
    if isinstance(output, str):
        return output
    if isinstance(output, File):
        path = workspace.write(output.path, output.content())
        return f"wrote {path} ({len(output.content())} bytes)"
    if output.data is None:
        return f"the tool returned an image, shown below\n{IMAGE_LINE.format(output.url)}"
    kind = parts.image_type(output.data) or "image/png"
    path = workspace.write(parts.tool_image(call_id, kind), output.data)
    return f"the tool returned an image, kept at {path} and shown below\n{IMAGE_LINE.format(path)}"


def shown(results: dict[str, str], workspace: Workspace) -> dict[str, list[dict[str, Any]]]:
    """The image parts each call's text names, by call id; a line naming what is not
    an image in the workspace, nor an http(s) URL, shows nothing."""
    found: dict[str, list[dict[str, Any]]] = {}
    for call_id, text in results.items():
        images = [image for where in IMAGE_LINES.findall(text) if (image := _image(where, workspace))]
        if images:
            found[call_id] = images
    return found


def message(images: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The user message that shows a reply's tool images to the model: a tool message
    holds text alone (OpenAI's chat format), so they follow the results."""
    content: list[dict[str, Any]] = [{"type": "text", "text": SHOWN}]
    for call_id, found in images.items():
        content += [{"type": "text", "text": f"From call {call_id}:"}, *found]
    return {"role": "user", "content": content}


def _image(where: str, workspace: Workspace) -> dict[str, Any] | None:
    if where.startswith(("https://", "http://")):
        url = where
    else:
        try:
            data = workspace.read_bytes(where)
        except WorkspaceError:
            return None
        kind = parts.image_type(data)
        if kind is None:
            return None
        url = parts.data_url(data, kind)
    return {"type": "image_url", "image_url": {"url": url}}
