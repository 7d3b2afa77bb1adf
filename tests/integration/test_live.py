"""Live progress: what a person at a terminal sees while a job runs, and the
Python client's watch, run and async waits."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys

import pytest

from covey.status import AgentStatus
from tests.integration.conftest import ROOT, worker_env

SLOW_TREE = "[sim:spawn width=2 depth=1] [sim:latency 600] What is 1 + 1?"


def in_terminal(redis_url: str, *args: str, timeout: float = 120) -> str:
    """Run the covey CLI with a pseudo-terminal as its output; everything it drew."""
    master, slave = pty.openpty()
    env = {**worker_env(redis_url), "TERM": "xterm", "COLUMNS": "160", "LINES": "50"}
    proc = subprocess.Popen([sys.executable, "-m", "covey", *args], stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        proc.wait(timeout=timeout)
    return b"".join(chunks).decode(errors="replace")


def running_rows_with_tokens(screen: str) -> list[str]:
    rows = (re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in screen.splitlines())
    return [r for r in rows if re.search(r"\s(running|waiting)\s+([1-9]\d*)\s", r)]


def test_tree_watch_redraws_until_the_end_showing_spend_as_agents_settle(client, redis_server):
    handle = client.submit(client.spec(SLOW_TREE, budget={"max_depth": 2}))
    screen = in_terminal(redis_server.url, "tree", handle.id, "--watch")
    assert running_rows_with_tokens(screen), screen[-2000:]  # a live agent's tokens before it ended
    assert handle.result(timeout=60).ok
    assert "3 done, 0 running, 0 waiting, 0 queued" in screen


@pytest.mark.slow
def test_run_on_a_terminal_shows_a_live_line_then_the_result(redis_server, worker):
    screen = in_terminal(redis_server.url, "run", SLOW_TREE, "--max-depth", "2")
    assert re.search(r"\d done, \d running, \d waiting, \d queued \| tokens \d+/\d+", screen), screen[-2000:]
    assert "status   completed" in screen and "output   leaves=2" in screen


def test_watch_yields_progress_until_the_job_ends(client):
    handle = client.submit(client.spec(SLOW_TREE, budget={"max_depth": 2}))
    seen = list(handle.watch(interval=0.1))
    assert seen[-1].finished and seen[-1].done == 3 and seen[-1].tokens_used > 0
    assert any(not p.finished for p in seen)
    assert [p.elapsed for p in seen] == sorted(p.elapsed for p in seen)


def test_run_and_the_async_waits_return_the_result(client):
    assert client.run("What is 2 + 5?", timeout=60).output == "7"
    result = asyncio.run(client.arun("What is 3 + 5?", timeout=60))
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "8")
