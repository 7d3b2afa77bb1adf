"""A job's events over HTTP, as a service in another language reads them: ``covey ui``
serves them as Server-Sent Events, resumable where a reader left off, and is
never open to a network without a password."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

from covey.events import JobEvent
from tests.integration.conftest import ROOT, UI_SAYS, said_address, worker_env, worker_log


@contextmanager
def served(redis_url: str, *flags: str) -> Iterator[str]:
    """``covey ui`` on a port it picks (``--port 0``); its base URL once it listens."""
    log = worker_log("covey-ui")
    proc = subprocess.Popen(
        [sys.executable, "-m", "covey", "ui", "--port", "0", *flags],
        env=worker_env(redis_url),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        yield said_address(proc, Path(log.name), UI_SAYS, "covey ui")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def read_sse(response: httpx2.Response) -> list[dict[str, str]]:
    """The messages of a Server-Sent Events body, as a browser's EventSource parses them."""
    messages, message = [], {}
    for line in response.iter_lines():
        if not line:
            if message:
                messages.append(message)
            message = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            message[field] = value.removeprefix(" ")
    return messages


def stream(url: str, **headers: str) -> list[dict[str, str]]:
    with httpx2.stream("GET", url, headers=headers, timeout=60) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return read_sse(response)


def test_a_jobs_events_stream_over_http_while_it_runs_and_resume_after_the_last_seen(redis_server, client):
    with served(redis_server.url) as base:
        handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 200] What is 2 + 3?"))
        messages = stream(f"{base}/jobs/{handle.id}/events")  # opened before the job's end, read to it
        events = list(handle.events())
        assert [(m["id"], m["event"]) for m in messages] == [(e.id, e.type.value) for e in events]
        assert [JobEvent.loads(m["id"], m["data"]) for m in messages] == events
        assert messages[-1]["event"] == "job.finished"
        middle = events[len(events) // 2].id
        resumed = stream(f"{base}/jobs/{handle.id}/events", **{"Last-Event-ID": middle})
        assert [m["id"] for m in resumed] == [e.id for e in events if e.id > middle]
        assert [m["id"] for m in stream(f"{base}/jobs/{handle.id}/events?after={middle}")] == [m["id"] for m in resumed]

        unknown = httpx2.get(f"{base}/jobs/no-such-job/events", timeout=10)
        assert unknown.status_code == 404 and "unknown job no-such-job" in unknown.json()["error"]
        gone = httpx2.get(f"{base}/jobs/{handle.id}/events", headers={"Last-Event-ID": "12-0"}, timeout=10)
        assert gone.status_code == 404 and "has no event 12-0" in gone.json()["error"]
        bad = httpx2.get(f"{base}/jobs/{handle.id}/events?after=yesterday", timeout=10)
        assert bad.status_code == 400 and "not an event id" in bad.json()["error"]
        no_sweeps = httpx2.get(f"{base}/sweeps", timeout=10)
        assert no_sweeps.status_code == 404 and "started without --sweeps DIR" in no_sweeps.text


def test_covey_ui_asks_for_a_password_it_was_given_and_never_opens_to_a_network_without_one(redis_server, client):
    with served(redis_server.url, "--basic-auth", "ops:s3cret") as base:
        handle = client.submit(client.spec("What is 2 + 3?"))
        handle.result(timeout=60)
        url = f"{base}/jobs/{handle.id}/events"
        assert httpx2.get(url, timeout=10).status_code == 401
        wrong = base64.b64encode(b"ops:guess").decode()
        assert httpx2.get(url, headers={"Authorization": f"Basic {wrong}"}, timeout=10).status_code == 401
        right = base64.b64encode(b"ops:s3cret").decode()
        assert stream(url, Authorization=f"Basic {right}")[-1]["event"] == "job.finished"
    exposed = subprocess.run(
        [sys.executable, "-m", "covey", "ui", "--address", "0.0.0.0", "--port", "0"],
        env=worker_env(redis_server.url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exposed.returncode == 2
    assert "is not a loopback address: give --basic-auth user:password (or COVEY_UI_BASIC_AUTH)" in exposed.stderr
