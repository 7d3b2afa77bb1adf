"""MCP servers' tools against real servers: one started over stdio by the session
under test, one over streamable HTTP on loopback."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from covey.tools import registry
from covey.tools.mcp import McpServers, McpToolFailed, McpUnavailable
from covey.tools.mcp import servers as servers_module
from covey.tools.tool import Tool, ToolContext
from tests.images import png
from tests.redis_server import free_port
from tests.tools.mcp.conftest import SERVER, TOKEN, TOKEN_ENV, HttpServer, http_table, stdio_table

SERVED = ["call_id", "chart", "echo", "fail", "grow", "hang", "pid", "weather"]  # the test server's tools, sorted
WAIT_SECONDS = 30  # for a call in flight to reach the server, or a killed one to answer


@pytest.fixture
def served(tmp_path) -> Iterator:
    """``served(text, environ)``: the servers of a servers file and their tools by name;
    every session is closed after the test."""
    opened: list[McpServers] = []

    def load(text: str, environ: dict[str, str] | None = None) -> tuple[McpServers, dict[str, Tool]]:
        path = tmp_path / "mcp.toml"
        path.write_text(text)
        servers = McpServers.load(path, {TOKEN_ENV: f"Bearer {TOKEN}"} if environ is None else environ)
        opened.append(servers)
        return servers, {tool.name: tool for tool in servers.tools()}

    yield load
    for servers in opened:
        servers.close()


@pytest.fixture
def serve(served):
    """``serve(text, environ)``: the tools of a servers file, by name."""
    return lambda text, environ=None: served(text, environ)[1]


def one_server(request, timeout: float = 30) -> str:
    """A servers file of one server named ``srv``, over the transport ``request.param``."""
    if request.param == "stdio":
        return stdio_table("srv", timeout=timeout)
    return http_table(request.getfixturevalue("http_server").url, "srv", timeout=timeout)


@pytest.fixture(params=["stdio", "http"])
def either(request) -> str:
    return one_server(request)


@pytest.fixture(params=["stdio", "http"])
def either_timeout_1s(request) -> str:
    return one_server(request, timeout=1)


class NoWorkspace:
    """MCP tools never touch the agent's workspace: any use of it fails the test."""

    def __getattr__(self, name: str):
        raise AssertionError(f"an MCP tool used the workspace ({name})")


CONTEXT = ToolContext(job_id="job-1", agent_id="job-1", call_id="call_abc123", workspace=NoWorkspace())


def call(tool: Tool, **arguments) -> str:
    return tool.run(arguments, CONTEXT)


def server_pid(tools: dict[str, Tool], server: str) -> int:
    return int(call(tools[f"{server}__pid"]))


def test_a_servers_tools_are_listed_and_called_under_its_name(serve, either):
    tools = serve(either)
    assert sorted(tools) == [f"srv__{name}" for name in SERVED]
    echo = tools["srv__echo"]
    assert (echo.origin, echo.description, echo.timeout) == ("mcp srv", "Say the text back.", 30)
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]
    assert call(echo, text="héllo") == "héllo"


def test_the_call_id_reaches_the_server_in_the_requests_meta(serve, either):
    assert call(serve(either)["srv__call_id"]) == "call_abc123"


def test_structured_content_becomes_its_json(serve, either):
    assert json.loads(call(serve(either)["srv__weather"], city="Oslo")) == {"city": "Oslo", "celsius": 4}


class KeptFiles:
    """An agent's view of its workspace that keeps what is written, below its folder."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def write(self, path: str, content: str | bytes) -> str:
        self.files[f"job-1/{path}"] = content if isinstance(content, bytes) else content.encode()
        return f"job-1/{path}"


def test_an_image_block_is_kept_in_the_workspace_and_named_on_an_image_line(serve, either):
    workspace = KeptFiles()
    context = ToolContext(job_id="job-1", agent_id="job-1", call_id="call_abc123", workspace=workspace)
    said = serve(either)["srv__chart"].run({"label": "sales"}, context)
    assert said == "chart of sales\n[image: job-1/images/call_abc123-1.png]"  # parts.IMAGE_LINE
    assert workspace.files == {"job-1/images/call_abc123-1.png": png(9, 3)}


def test_an_error_result_raises_with_the_servers_message(serve, either):
    tools = serve(either)
    with pytest.raises(McpToolFailed, match="disk on fire"):
        call(tools["srv__fail"], message="disk on fire")
    assert call(tools["srv__echo"], text="still here") == "still here"


def test_arguments_the_server_refuses_raise_its_message_and_the_session_goes_on(serve):
    tools = serve(stdio_table())
    with pytest.raises(McpToolFailed, match="Field required"):
        call(tools["local__echo"], wrong="argument")
    assert call(tools["local__echo"], text="ok") == "ok"


def test_one_session_per_process_per_server(serve):
    tools = serve(stdio_table())
    first = server_pid(tools, "local")
    results: list[str] = []
    slots = [threading.Thread(target=lambda: results.append(call(tools["local__echo"], text="x"))) for _ in range(8)]
    for slot in slots:
        slot.start()
    for slot in slots:
        slot.join(WAIT_SECONDS)
    assert results == ["x"] * 8
    assert server_pid(tools, "local") == first


def in_flight(tool: Tool, marker: Path) -> tuple[threading.Thread, list[BaseException | str]]:
    """A call to ``hang`` in a slot of its own, once the server has started it."""
    outcome: list[BaseException | str] = []

    def run() -> None:
        try:
            outcome.append(call(tool, marker=str(marker), seconds=WAIT_SECONDS * 2))
        except BaseException as e:
            outcome.append(e)

    slot = threading.Thread(target=run)
    slot.start()
    deadline = time.monotonic() + WAIT_SECONDS
    while not marker.exists():
        assert time.monotonic() < deadline, "the hang tool never started"
        time.sleep(0.02)
    return slot, outcome


def test_a_stdio_server_killed_mid_call_fails_the_call_and_the_next_call_restarts_it(serve, tmp_path):
    tools = serve(stdio_table())
    first = server_pid(tools, "local")
    slot, outcome = in_flight(tools["local__hang"], tmp_path / "started")
    os.kill(first, signal.SIGKILL)
    slot.join(WAIT_SECONDS)
    assert len(outcome) == 1 and isinstance(outcome[0], McpUnavailable), outcome
    assert "connection was lost during the call" in str(outcome[0])
    second = server_pid(tools, "local")
    assert second != first
    assert call(tools["local__echo"], text="back") == "back"


def test_an_http_server_killed_mid_call_fails_the_call_and_the_next_call_reopens(serve, http_server, tmp_path):
    tools = serve(http_table(http_server.url))
    first = server_pid(tools, "remote")
    slot, outcome = in_flight(tools["remote__hang"], tmp_path / "started")
    http_server.kill()
    slot.join(WAIT_SECONDS)
    assert len(outcome) == 1 and isinstance(outcome[0], McpUnavailable), outcome
    http_server.start()
    assert server_pid(tools, "remote") != first
    assert call(tools["remote__echo"], text="back") == "back"


def test_a_server_that_cannot_start_serves_nothing_and_the_others_serve(serve, caplog):
    text = '[servers.broken]\ncommand = "/nonexistent/mcp-server"\n' + stdio_table()
    with caplog.at_level(logging.WARNING, logger="covey.tools.mcp"):
        tools = serve(text)
    assert sorted(tools) == [f"local__{name}" for name in SERVED]
    assert "MCP server 'broken' (stdio: /nonexistent/mcp-server) cannot be used: [Errno 2]" in caplog.text


def killed(servers: McpServers, pid: int) -> None:
    """Kill the stdio server ``pid`` and wait, bounded, until its session has seen it go."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + WAIT_SECONDS
    while not servers.sessions[0]._open.ended.is_set():  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the session never saw its server go"
        time.sleep(0.02)


def test_a_stdio_server_that_died_between_calls_is_started_again_by_the_next_call(served):
    servers, tools = served(stdio_table())
    first = server_pid(tools, "local")
    killed(servers, first)
    second = server_pid(tools, "local")
    assert second != first
    assert call(tools["local__echo"], text="back") == "back"


def test_a_server_that_cannot_restart_answers_its_calls_with_the_reason(served, tmp_path):
    script = tmp_path / "server.py"
    shutil.copy(SERVER, script)
    servers, tools = served(stdio_table(script=script))
    pid = server_pid(tools, "local")
    script.unlink()
    killed(servers, pid)
    with pytest.raises(McpUnavailable, match="MCP server .local. is unavailable: the process ended before it answered"):
        call(tools["local__echo"], text="x")


def test_header_values_come_from_the_named_variables_and_are_never_logged(serve, http_server, caplog):
    with caplog.at_level(logging.DEBUG):
        tools = serve(http_table(http_server.url))
        assert call(tools["remote__echo"], text="in") == "in"
        refused = serve(http_table(http_server.url, "wrong"), {TOKEN_ENV: "Bearer not-the-token"})
    assert refused == {}
    assert "MCP server 'wrong': HTTP 401" in caplog.text
    assert TOKEN not in caplog.text and "not-the-token" not in caplog.text


def test_an_unset_header_variable_makes_the_server_unavailable_naming_it(serve, http_server, caplog):
    with caplog.at_level(logging.WARNING, logger="covey.tools.mcp"):
        assert serve(http_table(http_server.url), environ={}) == {}
    assert f"header Authorization: its variable {TOKEN_ENV} is not set on this worker" in caplog.text


def test_an_http_server_restarted_between_calls_is_reached_again_without_an_error(serve, http_server):
    tools = serve(http_table(http_server.url))
    first = server_pid(tools, "remote")
    http_server.kill()
    http_server.start()
    second = server_pid(tools, "remote")
    assert second != first
    assert server_pid(tools, "remote") == second


def test_a_call_past_the_servers_timeout_fails_and_the_session_goes_on(serve, either_timeout_1s, tmp_path):
    tools = serve(either_timeout_1s)
    first = server_pid(tools, "srv")
    with pytest.raises(McpToolFailed, match="timed out"):
        call(tools["srv__hang"], marker=str(tmp_path / "started"), seconds=WAIT_SECONDS)
    assert server_pid(tools, "srv") == first


def test_a_server_down_at_start_serves_its_tools_once_a_later_listing_finds_it_up(served, monkeypatch, caplog):
    """An HTTP server that starts after the tools were listed: its tools reach the
    registry's ``add`` from a background listing, and they call it."""
    monkeypatch.setattr(servers_module, "FIRST_RETRY_SECONDS", 0.2)
    late = HttpServer(free_port())  # its port chosen, nothing listening yet
    servers, tools = served(http_table(late.url, "late") + stdio_table())
    assert sorted(tools) == [f"local__{name}" for name in SERVED]
    added: list[Tool] = []
    with caplog.at_level(logging.INFO, logger="covey.tools.mcp"):
        servers.serve_late(added.extend)
        late.start()
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while not added:
                assert time.monotonic() < deadline, "the server's tools never came"
                time.sleep(0.05)
            by_name = {tool.name: tool for tool in added}
            assert sorted(by_name) == [f"late__{name}" for name in SERVED]
            assert call(by_name["late__echo"], text="up at last") == "up at last"
        finally:
            late.kill()
    assert servers.down == []
    assert "MCP server 'late' is up now: its tools are served from here on" in caplog.text


def test_configured_timeouts_of_a_late_servers_tools_wait_for_them(monkeypatch, tmp_path, caplog):
    """``COVEY_TOOL_TIMEOUTS`` may name a tool of a server down at start: the load
    goes on, the tool has that timeout once it comes, and a name the server turns
    out not to serve is logged. A name no down server could serve still stops it."""
    builtins = dict(registry._served)
    monkeypatch.setattr(registry, "_served", dict(builtins))
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(servers_module, "FIRST_RETRY_SECONDS", 0.2)
    monkeypatch.setenv(TOKEN_ENV, f"Bearer {TOKEN}")  # the worker's environment names the servers' secrets
    late = HttpServer(free_port())  # its port chosen, nothing listening yet
    path = tmp_path / "mcp.toml"
    path.write_text(http_table(late.url, "late"))
    registry.load(None, {"late__echo": 3, "late__nope": 2}, path)
    assert "late__echo" not in registry.names()
    with caplog.at_level(logging.INFO, logger="covey.tools"):
        late.start()
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while "late__echo" not in registry.names():
                assert time.monotonic() < deadline, "the server's tools never came"
                time.sleep(0.05)
            assert (registry.get("late__echo").timeout, registry.get("late__pid").timeout) == (3, 30)
            assert "no tool 'late__nope' is served by its MCP server, up now; it is ignored" in caplog.text
            monkeypatch.setattr(registry, "_served", dict(builtins))
            monkeypatch.setattr(registry, "_loaded", False)
            with pytest.raises(registry.ToolsError, match="COVEY_TOOL_TIMEOUTS: no tool 'other__echo' is served"):
                registry.load(None, {"other__echo": 3}, path)  # no server is down
        finally:
            late.kill()


def test_a_server_serves_the_tools_its_file_includes_and_does_not_exclude(serve):
    tools = serve(stdio_table("srv") + 'include = ["e*", "w*", "pid"]\nexclude = ["weather"]\napprove = ["p*"]\n')
    assert sorted(tools) == ["srv__echo", "srv__pid"]
    assert (tools["srv__pid"].needs_approval, tools["srv__echo"].needs_approval) == (True, False)
    assert call(tools["srv__echo"], text="still called") == "still called"


def followed(servers: McpServers) -> list[tuple[str, dict[str, Tool]]]:
    """What ``servers`` hand on as changed: (origin, its tools by name), as they come."""
    handed: list[tuple[str, dict[str, Tool]]] = []
    servers.follow(lambda origin, tools: handed.append((origin, {t.name: t for t in tools})))
    return handed


def handed_on(handed: list) -> tuple[str, dict[str, Tool]]:
    deadline = time.monotonic() + WAIT_SECONDS
    while not handed:
        assert time.monotonic() < deadline, "the server's new tools were never handed on"
        time.sleep(0.05)
    return handed[-1]


def test_a_tool_the_server_adds_is_served_once_it_says_its_list_changed(served, either):
    servers, tools = served(either)
    handed = followed(servers)
    assert call(tools["srv__echo"], text="same") == "same" and handed == []  # nothing changed, nothing handed
    assert call(tools["srv__grow"], name="tides") == "serving tides"
    origin, now = handed_on(handed)
    assert origin == "mcp srv" and sorted(now) == sorted(f"srv__{n}" for n in [*SERVED, "tides"])
    assert call(now["srv__tides"]) == "grown tides"


def test_a_session_opened_again_serves_the_tools_the_restarted_server_lists(served, tmp_path):
    """The server restarts with a tool more, telling no one: the session the next call
    opens lists it, and the tools are handed on."""
    grown = tmp_path / "grown"
    servers, tools = served(stdio_table(grown=grown))
    handed = followed(servers)
    grown.write_text("tides\n")
    killed(servers, server_pid(tools, "local"))
    assert call(tools["local__echo"], text="again") == "again"
    origin, now = handed_on(handed)
    assert origin == "mcp local" and "local__tides" in now and len(now) == len(SERVED) + 1
