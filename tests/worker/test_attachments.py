"""Images and files between tools, the workspace and the model, on a real Redis."""

from __future__ import annotations

import uuid

import pytest

from covey import BadPart, File, Image, JobSpec, keys
from covey.parts import data_url
from covey.store.workspace import Workspace, WorkspaceError
from covey.worker import attachments
from covey.worker.tools import AgentWorkspace
from tests.images import png

PICTURE = png(3, 3)


@pytest.fixture
def workspace(redis_client):
    return Workspace(redis_client, f"t-{uuid.uuid4().hex}", keys.DEFAULT_JOB_TTL_SECONDS)


def test_the_workspace_keeps_bytes_and_reads_text_only_as_text(workspace):
    assert workspace.write("", "a.png", PICTURE) == "a.png"
    workspace.write("", "b.txt", "héllo")
    assert workspace.read_bytes("a.png") == PICTURE  # whatever the client's decode_responses
    assert workspace.read("b.txt") == "héllo"
    with pytest.raises(WorkspaceError, match=f"'a.png' is not text: image/png, {len(PICTURE)} bytes"):
        workspace.read("a.png")
    assert workspace.sizes() == {"a.png": len(PICTURE), "b.txt": 6}
    workspace.write("", "b.txt", "kept?", keep=True)
    assert workspace.read("b.txt") == "héllo"


def test_a_tools_image_is_kept_in_its_folder_and_shown_to_the_next_call(workspace):
    view = AgentWorkspace(workspace, ".sub_agents/x")
    text = attachments.stored(Image(data=PICTURE), view, "call:1/a")
    path = ".sub_agents/x/images/call_1_a.png"
    assert text == f"the tool returned an image, kept at {path} and shown below\n[image: {path}]"
    linked = attachments.stored(Image(url="https://example.com/c.png"), view, "c2")
    found = attachments.shown({"c1": text, "c2": linked, "c3": "plain"}, workspace)
    assert found == {
        "c1": [{"type": "image_url", "image_url": {"url": data_url(PICTURE, "image/png")}}],
        "c2": [{"type": "image_url", "image_url": {"url": "https://example.com/c.png"}}],
    }
    message = attachments.message(found)
    assert message["role"] == "user" and [p["type"] for p in message["content"]] == ["text"] + ["text", "image_url"] * 2


def test_only_an_image_in_the_workspace_is_shown(workspace):
    workspace.write("", "notes.txt", "secret")
    lines = "[image: notes.txt]\n[image: missing.png]\n[image: ftp://x/y.png]"
    assert attachments.shown({"c": lines}, workspace) == {}


def test_a_tools_file_is_written_below_its_folder(workspace):
    view = AgentWorkspace(workspace, ".sub_agents/x")
    assert attachments.stored(File("out.csv", b"a,b\n"), view, "c") == "wrote .sub_agents/x/out.csv (4 bytes)"
    with pytest.raises(BadPart, match="escapes"):  # refused as the tool makes it: the tool's error
        File("a/../../y", "z")


def test_a_tasks_files_go_into_the_workspace_once(workspace):
    spec = JobSpec(task=["Read them.", File("in/a.txt", "one"), Image(data=PICTURE)])
    attachments.given(workspace, spec.parts)
    workspace.write("", "in/a.txt", "changed by an agent")
    attachments.given(workspace, spec.parts)  # a redelivered start
    assert workspace.files() == ["in/a.txt"] and workspace.read("in/a.txt") == "changed by an agent"
