"""Images and files through a real worker, a real Redis and the sim over the SDK's path.

The sim reads each image part as its type, pixels and bytes, and answers with
what it read: an answer that names an image's size proves the model was sent it
as a content part. The worker serves ``tests.integration.file_tools``: ``chart``
returns an image, ``shout`` reads a workspace file and returns another.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from celery import Celery
from celery.utils import uuid

from covey import File, Image, JobSpec
from covey.store.workspace import WorkspaceError
from tests.images import png
from tests.integration.conftest import ROOT, own_worker, worker_env

PICTURE = png(4, 3)


@pytest.fixture(scope="module")
def served():
    with own_worker(concurrency=2, COVEY_TOOLS="tests.integration.file_tools") as (server, client):
        yield server, client


def test_an_image_in_the_task_reaches_the_model_as_a_content_part(served):
    _, client = served
    handle = client.submit(JobSpec(task=["Describe this picture.", Image(data=PICTURE)], tools=[]))
    result = handle.result(timeout=60)
    assert result.output == f"done: Describe this picture. [image image/png 4x3, {len(PICTURE)} bytes]"
    sent = handle.transcript().events[0].sent
    task = sent[-1]["content"]  # the transcript describes the image, never its base64
    assert task[1] == {"type": "image_url", "image_url": {"url": f"[image image/png 4x3, {len(PICTURE)} bytes]"}}


def test_a_tools_image_reaches_the_next_model_call_and_stays_in_the_workspace(served):
    _, client = served
    spec = JobSpec(task='Draw the sales. [sim:call chart {"label": "sales"}]', tools=["chart"])
    handle = client.submit(spec)
    result = handle.result(timeout=60)
    drawn = png(9, 3)
    assert result.status == "completed", result.error
    assert result.output.endswith(f"(saw [image image/png 9x3, {len(drawn)} bytes])"), result.output
    [kept] = [path for path in handle.files() if path.startswith("images/")]
    assert kept in result.output and handle.get_file(kept) == drawn
    calls = [e for e in handle.transcript().events if hasattr(e, "sent")]
    shown = calls[1].sent[-1]
    assert shown["role"] == "user" and shown["content"][-1]["image_url"]["url"].startswith("[image image/png 9x3")


def test_a_file_put_by_the_client_is_read_by_a_tool_whose_file_the_client_reads_back(served):
    _, client = served
    job_id = uuid()
    assert client.put_file(job_id, "notes/today.txt", "buy milk") == "notes/today.txt"
    spec = JobSpec(task='Shout my notes. [sim:call shout {"path": "notes/today.txt"}]', tools=["shout"])
    handle = client.submit(spec, job_id=job_id)
    assert handle.result(timeout=60).output == "wrote shouted.txt (8 bytes)"
    assert handle.get_file("shouted.txt") == b"BUY MILK"
    assert handle.files() == {"notes/today.txt": 8, "shouted.txt": 8}


def test_a_file_of_the_task_is_in_the_workspace_when_the_agent_reads_it(served):
    _, client = served
    task = ['Sum it up. [sim:call read_file {"path": "data/sales.csv"}]', File("data/sales.csv", "month,total\n1,42\n")]
    handle = client.submit(JobSpec(task=task, tools=["read_file"]))
    assert handle.result(timeout=60).output == "month,total\n1,42\n"
    note = handle.transcript().events[0].sent[-1]["content"][-1]["text"]
    assert note.endswith("(read them with read_file): data/sales.csv (17 bytes)")


def test_bad_files_are_refused_at_the_client(served):
    _, client = served
    job = client.job(uuid())
    with pytest.raises(WorkspaceError, match="escapes the workspace"):
        job.put_file("../etc/passwd", "x")
    with pytest.raises(WorkspaceError, match="file too large"):
        job.put_file("big.bin", b"\0" * (256 * 1024 + 1))
    with pytest.raises(WorkspaceError, match="no file 'missing.txt'"):
        job.get_file("missing.txt")
    assert job.files() == {}


def test_a_bad_part_sent_past_the_client_is_refused_by_the_worker(served):
    server, client = served
    app = Celery("elsewhere", broker=server.url, backend=server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    try:
        bad = {"task": ["Look.", {"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}]}
        sent = app.send_task("covey.run_job", kwargs={"spec": bad}, queue="covey")
        sent.get(timeout=60, propagate=False)
        assert sent.state == "FAILURE"
        assert "task.1.image_url.image_url.url: image: not base64" in str(sent.result)
        assert client.job(sent.id).status() == "refused"
        unknown = app.send_task("covey.run_job", kwargs={"spec": {"task": [{"type": "audio"}]}}, queue="covey")
        unknown.get(timeout=60, propagate=False)
        assert "does not match any of the expected tags: 'text', 'image_url', 'file'" in str(unknown.result)
    finally:
        app.close()
    # The worker lived through both: it still runs jobs.
    assert client.submit(JobSpec(task="What is 2 + 3?")).result(timeout=60).output == "5"


def covey(url: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "covey", *args],
        input=stdin,
        capture_output=True,
        env=worker_env(url),
        cwd=ROOT,
        timeout=120,
    )


def test_covey_files_lists_reads_and_puts(served, tmp_path):
    server, client = served
    job_id = uuid()
    put = covey(server.url, "files", job_id, "in/notes.md", "--put", "-", stdin=b"# notes\n")
    assert (put.returncode, put.stdout.decode()) == (0, "put in/notes.md (8 bytes)\n"), put.stderr
    client.put_file(job_id, "chart.png", PICTURE)
    listed = covey(server.url, "files", job_id)
    assert listed.stdout.decode().splitlines() == [f"{len(PICTURE):>9}  chart.png", "        8  in/notes.md"]
    assert covey(server.url, "files", job_id, "in/notes.md").stdout == b"# notes\n"
    assert covey(server.url, "files", job_id, "chart.png").stdout == PICTURE  # to a pipe: the bytes
    out = tmp_path / "chart.png"
    assert covey(server.url, "files", job_id, "chart.png", "-o", str(out)).returncode == 0
    assert out.read_bytes() == PICTURE
    escaping = covey(server.url, "files", job_id, "../x", "--put", "-", stdin=b"x")
    assert (escaping.returncode, escaping.stderr.decode()) == (1, "Error: path '../x' escapes the workspace\n")
    missing = covey(server.url, "files", job_id, "nope.txt")
    assert (missing.returncode, missing.stderr.decode()) == (1, "Error: no file 'nope.txt'\n")


def test_covey_run_takes_images_and_files(served, tmp_path):
    server, client = served
    picture, notes = tmp_path / "pic.png", tmp_path / "notes.txt"
    picture.write_bytes(PICTURE)
    notes.write_text("buy milk")
    task = 'Describe it. [sim:call read_file {"path": "notes.txt"}]'
    flags = ["--image", str(picture), "--file", str(notes), "--tools", "read_file", "--json"]
    ran = covey(server.url, "run", task, *flags)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["output"] == "buy milk"
    job_id = result["job_id"]
    sent = client.job(job_id).transcript().events[0].sent[-1]["content"]
    assert sent[1]["image_url"]["url"] == f"[image image/png 4x3, {len(PICTURE)} bytes]"
    refused = covey(server.url, "run", "Describe it.", "--image", str(notes))
    assert refused.returncode == 2
    assert refused.stderr.decode().endswith("notes.txt: Image data is not a PNG, JPEG, GIF or WebP image\n")
