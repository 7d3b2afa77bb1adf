"""Agents that use MCP servers' tools, through a real worker, a real Redis and real
MCP servers: ``tests/tools/mcp/server.py`` over stdio (each worker process starts
its own) and over streamable HTTP on loopback (behind a bearer token the servers
file names by its variable). The sim's ``[sim:call NAME {...}]`` makes the model
call a tool over the real SDK path and answer with what the tool said.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from celery import Celery

from covey.client import Client
from covey.config.settings import Settings
from covey.spec import InvalidSpec
from tests.images import png
from tests.integration.conftest import (
    ROOT,
    called,
    start_covey_worker,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.redis_server import RedisServer, free_port
from tests.tools.mcp.conftest import TOKEN, TOKEN_ENV, HttpServer, http_table, stdio_table

ECHO = {transport: f'Say it. [sim:call {server}__echo {{"text": "hello over {transport}"}}]'
        for transport, server in (("stdio", "local"), ("http", "remote"))}  # fmt: skip
WAIT_SECONDS = 60


@pytest.fixture(scope="module")
def server():
    with RedisServer() as s:
        yield s


@pytest.fixture(scope="module")
def http_server():
    s = HttpServer()
    s.start()
    yield s
    s.kill()


@pytest.fixture(scope="module")
def env(server, http_server, tmp_path_factory):
    servers = tmp_path_factory.mktemp("mcp") / "servers.toml"
    servers.write_text(stdio_table(timeout=20) + http_table(http_server.url, timeout=20))
    return {"COVEY_MCP": str(servers), TOKEN_ENV: f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def client(server, env):
    c = Client(Settings(redis_url=server.url))
    worker = start_worker(server.url, **env)
    wait_for_worker(c, worker)
    yield c
    stop_worker(worker)
    c.close()


def answer(client: Client, task: str) -> str:
    result = client.submit(client.spec(task, tools=called(task))).result(timeout=90)
    assert result.status == "completed", result.error
    assert result.usage.tool_calls == 1
    return result.output


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_react_agent_answers_through_an_mcp_tool(client, transport):
    assert answer(client, ECHO[transport]) == f"hello over {transport}"


def test_structured_content_reaches_the_model_as_json(client):
    output = answer(client, 'Weather? [sim:call remote__weather {"city": "Oslo"}]')
    assert json.loads(output) == {"city": "Oslo", "celsius": 4}


@pytest.mark.parametrize("server_name", ["local", "remote"])
def test_an_mcp_tools_image_reaches_the_next_model_call_and_stays_in_the_workspace(client, server_name):
    task = f'Draw the sales. [sim:call {server_name}__chart {{"label": "sales"}}]'
    handle = client.submit(client.spec(task, tools=called(task)))
    result = handle.result(timeout=90)
    drawn = png(9, 3)
    assert result.status == "completed", result.error
    assert result.output.startswith("chart of sales\n"), result.output
    assert result.output.endswith(f"(saw [image image/png 9x3, {len(drawn)} bytes])"), result.output
    [kept] = [path for path in handle.files() if path.startswith("images/")]
    assert kept in result.output and handle.get_file(kept) == drawn


def test_the_same_job_from_the_cli_and_a_bare_celery_client(client, server, env):
    proc = subprocess.run(
        [sys.executable, "-m", "covey", "run", ECHO["stdio"], "--tools", "local__echo,finish"],
        env=worker_env(server.url, **env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert dict(line.split(None, 1) for line in proc.stdout.splitlines())["output"] == "hello over stdio"

    app = Celery("elsewhere", broker=server.url, backend=server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    try:
        spec = {"task": ECHO["http"], "tools": ["remote__echo"]}
        sent = app.send_task("covey.run_job", kwargs={"spec": spec}, queue="covey")
        result = sent.get(timeout=90)
    finally:
        app.close()
    assert (result["status"], result["output"]) == ("completed", "hello over http")


def test_an_mcp_error_result_is_handed_to_the_model_and_the_agent_goes_on(client):
    output = answer(client, 'Try. [sim:call local__fail {"message": "disk on fire"}]')
    assert output.startswith("error: ") and "disk on fire" in output


def test_the_catalog_lists_the_servers_tools_with_their_origin(client):
    served = {tool.name: tool.origin for entry in client.catalog.entries("covey") for tool in entry.tools}
    assert (served["local__echo"], served["remote__echo"]) == ("mcp local", "mcp remote")


def test_a_stdio_server_killed_mid_call_fails_that_call_and_the_next_call_reopens_it(client, tmp_path):
    first_pid = int(answer(client, "Pid? [sim:call local__pid {}]"))
    marker = tmp_path / "in-flight"
    hang = f'Wait. [sim:call local__hang {{"marker": "{marker}", "seconds": 600}}]'
    hung = client.submit(client.spec(hang, tools=called(hang)))
    deadline = time.monotonic() + WAIT_SECONDS
    while not marker.exists():
        assert time.monotonic() < deadline, f"the hang call never reached the server in {WAIT_SECONDS}s"
        time.sleep(0.05)
    os.kill(first_pid, signal.SIGKILL)
    result = hung.result(timeout=90)
    assert result.status == "completed", result.error
    assert result.output.startswith("error: ")  # the model was told the call failed
    second_pid = int(answer(client, "Pid? [sim:call local__pid {}]"))
    assert second_pid != first_pid
    assert answer(client, ECHO["stdio"]) == "hello over stdio"


def test_a_worker_started_before_its_mcp_server_serves_its_tools_once_the_server_is_up(server, tmp_path):
    """The servers file names an HTTP server that is not up when the worker starts:
    a job naming its tool is refused at submit, and once the server is up the
    worker's background listing serves the tool, publishes it, and the job runs.
    The worker's COVEY_TOOL_TIMEOUTS for one of its tools waits for it, and holds."""
    late = HttpServer(free_port())  # its port chosen, nothing listening yet
    servers = tmp_path / "late.toml"
    servers.write_text(http_table(late.url, "late", timeout=20))
    client = Client(Settings(redis_url=server.url, queue="mcp-late"))
    env = {"COVEY_MCP": str(servers), TOKEN_ENV: f"Bearer {TOKEN}", "COVEY_CATALOG_TTL": "6"}
    worker = start_worker(server.url, COVEY_QUEUE="mcp-late", COVEY_TOOL_TIMEOUTS='{"late__hang": 1}', **env)
    spec = client.spec('Say it. [sim:call late__echo {"text": "late but here"}]', tools=["late__echo"])
    call = json.dumps({"marker": str(tmp_path / "hung"), "seconds": WAIT_SECONDS})
    hang = client.spec(f"Wait for it. [sim:call late__hang {call}]", tools=["late__hang"])
    try:
        wait_for_worker(client, worker)
        published(client, lambda tools: bool(tools), "the worker never published its catalog entry")
        with pytest.raises(InvalidSpec, match="tool 'late__echo' is served by no worker on queue 'mcp-late'"):
            client.submit(spec)
        late.start()
        published(client, lambda tools: "late__echo" in tools, "the worker never published the late server's tools")
        result, hung = (client.submit(s).result(timeout=90) for s in (spec, hang))
    finally:
        stop_worker(worker)
        late.kill()
    assert (result.status, result.output, result.usage.tool_calls) == ("completed", "late but here", 1)
    assert hung.output == "error: ToolTimeout: tool 'late__hang' did not return within its timeout of 1s"


def published(client: Client, enough, why: str) -> None:
    """Wait, bounded, until the tools the catalog lists on the client's queue are
    ``enough`` (an entry's first beat may come after the worker answers a ping)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not enough({t.name for e in client.catalog.entries(client.settings.queue) for t in e.tools}):
        assert time.monotonic() < deadline, why
        time.sleep(0.1)


def test_a_tool_a_running_server_adds_is_offered_after_it_says_so_without_a_worker_restart(server, http_server):
    """A default worker (a process per core, each with its own session): a job makes
    the HTTP server grow a tool; the server says its list changed, every process
    serves and publishes the tool at once, and the next job naming it calls it."""
    client = Client(Settings(redis_url=server.url, queue="mcp-grow"))
    servers = Path(tempfile.mkdtemp(prefix="covey-grow-")) / "servers.toml"
    servers.write_text(http_table(http_server.url, "remote", timeout=20))
    env = {"COVEY_QUEUE": "mcp-grow", "COVEY_MCP": str(servers), TOKEN_ENV: f"Bearer {TOKEN}"}
    worker = start_covey_worker(server.url, [], **env)  # no flags: the defaults
    grow = 'Grow. [sim:call remote__grow {"name": "tides_now"}]'
    tides = client.spec("Tides? [sim:call remote__tides_now {}]", tools=["remote__tides_now"])
    try:
        wait_for_worker(client, worker)
        every_process_lists(client, "remote__grow", "not every worker process published its catalog entry")
        with pytest.raises(InvalidSpec, match="tool 'remote__tides_now' is served by no worker on queue 'mcp-grow'"):
            client.submit(tides)
        assert client.run(client.spec(grow, tools=called(grow)), timeout=90).output == "serving tides_now"
        every_process_lists(client, "remote__tides_now", "not every worker process published the tool the server grew")
        result = client.submit(tides).result(timeout=90)
    finally:
        stop_worker(worker)
        client.close()
        shutil.rmtree(servers.parent)
    assert (result.status, result.output, result.usage.tool_calls) == ("completed", "grown tides_now", 1)


def every_process_lists(client: Client, tool: str, why: str) -> None:
    """Wait, bounded, until each of the default worker's processes (one per core) has
    an entry in the catalog on the client's queue, and each lists ``tool``."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        entries = client.catalog.entries(client.settings.queue)
        if len(entries) == os.cpu_count() and all(tool in {t.name for t in e.tools} for e in entries):
            return
        assert time.monotonic() < deadline, why
        time.sleep(0.1)
