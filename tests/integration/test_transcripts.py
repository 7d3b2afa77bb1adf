"""Transcripts through a real worker, a real Redis and the SDK's HTTP path to
``covey sim-server``: what ``covey transcript`` shows of agents that called a
function tool and an MCP server's tool (over streamable HTTP, behind a bearer
token), that no secret of the worker's environment is ever kept, the cap's note,
a killed step's rerun, and the off switch."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing

import pytest
import redis

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import (
    ROOT,
    SIMHTTP,
    called,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.redis_server import RedisServer
from tests.tools.mcp.conftest import TOKEN, TOKEN_ENV, HttpServer, http_table

TOOLS = "tests.integration.served_tools,tests.integration.transcript_tools"
ADD = 'Add two and three. [sim:call add {"a": 2, "b": 3}]'
# Fake, long, and without a provider's prefix: only their exact values can mask them.
SECRETS = {
    "OPENAI_API_KEY": "fake-openai-" + "o" * 32,
    "COVEY_SECRET": "fake-signing-" + "c" * 32,
    "SIMHTTP_KEY": "fake-models-file-key-" + "m" * 32,  # sent as the Authorization header to simhttp
    TOKEN_ENV: f"Bearer {TOKEN}",  # the MCP servers file's Authorization header
}
ECHO = 'Say it. [sim:call remote__echo {"text": "hello over MCP"}]'


@pytest.fixture(scope="module")
def server():
    with RedisServer() as s:
        yield s


@pytest.fixture(scope="module")
def env(server, tmp_path_factory):
    sim, base_url = start_sim_server(server.url)
    mcp = HttpServer()
    mcp.start()
    servers = tmp_path_factory.mktemp("mcp") / "servers.toml"
    servers.write_text(http_table(mcp.url, timeout=20))
    yield {
        "COVEY_TOOLS": TOOLS,
        "COVEY_MCP": str(servers),
        "PYTHONPATH": str(ROOT),
        **served_over_http(tmp_path_factory.mktemp("models"), base_url),
        **SECRETS,
    }
    mcp.kill()
    stop_worker(sim)


@pytest.fixture(scope="module")
def client(server, env):
    c = Client(Settings(redis_url=server.url, secret=SECRETS["COVEY_SECRET"]))
    worker = start_worker(server.url, **env)
    wait_for_worker(c, worker)
    yield c
    stop_worker(worker)
    c.close()


def covey(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(server.url),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def finished(client: Client, task: str, **fields):
    handle = client.submit(client.spec(task, tools=called(task), **fields))
    result = handle.result(timeout=90)
    assert result.status == "completed", result.error
    return handle, result


def test_covey_transcript_shows_the_messages_the_calls_the_tool_and_the_usage(client, server):
    handle, result = finished(client, ADD, model=SIMHTTP)
    proc = covey(server, "transcript", handle.id)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"agent root · root · completed · {result.usage.total_tokens} tokens"
    assert lines[2:4] == ["  → system     You are root, an agent of covey at depth 0.", f"  → user       {ADD}"]
    t = handle.transcript("root")
    first, tool, second = t.events
    assert lines[1].startswith(
        f"── call 1 · {SIMHTTP} · {first.usage.prompt_tokens} prompt + {first.usage.completion_tokens} "
        "completion tokens · finish tool_calls · "
    )
    assert lines[4] == '  ← assistant  add({"a": 2, "b": 3})'
    assert lines[5].startswith(f"── tool add ({tool.call_id}) · ") and lines[5].endswith(" ms")
    assert lines[6:8] == ['  arguments {"a": 2, "b": 3}', '  result    {"sum":5}']
    assert lines[8].startswith(f"── call 2 · {SIMHTTP} · {second.usage.prompt_tokens} prompt + ")
    assert lines[9:] == [
        '  → assistant  add({"a": 2, "b": 3})',
        f'  → tool[{tool.call_id}] {{"sum":5}}',
        '  ← assistant  finish({"answer": "{\\"sum\\":5}"})',
    ]
    assert first.params["model"] == "sim"  # the provider's id, behind the models file's name
    assert first.usage.total_tokens + second.usage.total_tokens == result.usage.total_tokens
    as_json = json.loads(covey(server, "transcript", handle.id, "root", "--json").stdout)
    assert as_json == t.model_dump(mode="json")


def test_covey_transcript_shows_an_mcp_tool_call_and_its_result(client, server):
    handle, result = finished(client, ECHO, model=SIMHTTP)
    assert result.output == "hello over MCP"
    proc = covey(server, "transcript", handle.id, "root")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    tool = lines.index(next(line for line in lines if line.startswith("── tool remote__echo (")))
    assert lines[tool + 1 : tool + 3] == ['  arguments {"text": "hello over MCP"}', "  result    hello over MCP"]
    assert lines[tool - 1] == '  ← assistant  remote__echo({"text": "hello over MCP"})'
    assert lines[-1] == '  ← assistant  finish({"answer": "hello over MCP"})'


def test_no_secret_of_the_workers_environment_is_in_any_transcript(client, server):
    for name in SECRETS:
        _, result = finished(client, f'Reveal it. [sim:call reveal {{"name": "{name}"}}]')
        assert result.output == "***"  # the tool did leak it, to the model: masked in the answer
    finished(client, ADD, model=SIMHTTP)  # a call whose Authorization header carried SIMHTTP_KEY
    finished(client, ECHO)  # an MCP call whose Authorization header carried the token
    r = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        kept = [v for key in r.scan_iter("covey:*:transcript:*", count=1000) for v in r.hvals(key)]
    finally:
        r.close()
    text = "\n".join(kept)
    masked = text.count('"result":"***"') + text.count('"result":"Bearer ***"')  # the scheme is no secret
    assert text.count('"tool":"reveal"') == len(SECRETS) == masked
    assert not [name for name, value in SECRETS.items() if value in text] and TOKEN not in text


def test_a_small_cap_cuts_the_transcript_and_says_where_and_how_much(server, env):
    c = Client(Settings(redis_url=server.url, secret=SECRETS["COVEY_SECRET"], queue="capped"))
    worker = start_worker(server.url, **env, COVEY_QUEUE="capped", COVEY_TRANSCRIPT_BYTES="1500")
    try:
        wait_for_worker(c, worker)
        handle, _ = finished(c, ADD)
    finally:
        stop_worker(worker)
        c.close()
    t = Client(Settings(redis_url=server.url)).job(handle.id).transcript()
    # The whole transcript is three entries (call 1, its tool call, call 2): the cap keeps the first.
    kept = [(e.kind, e.cycle) for e in t.events]
    assert kept == [("model", 1), ("tool", 1), ("model", 2)][: len(kept)] and 1 <= len(kept) < 3
    assert t.cut is not None and t.cut.entries == 3 - len(kept) and t.bytes <= 1500 < t.bytes + t.cut.bytes
    last = covey(server, "transcript", handle.id).stdout.splitlines()[-1]
    assert last == (
        f"[transcript cut from {t.cut.at} on: {t.cut.entries} more entries, {t.cut.bytes} bytes, "
        "past COVEY_TRANSCRIPT_BYTES]"
    )


def test_off_records_no_transcript(server, env):
    c = Client(Settings(redis_url=server.url, secret=SECRETS["COVEY_SECRET"], queue="quiet"))
    worker = start_worker(server.url, **env, COVEY_QUEUE="quiet", COVEY_TRANSCRIPTS="off")
    try:
        wait_for_worker(c, worker)
        handle, _ = finished(c, ADD)
        assert handle.transcript() is None
    finally:
        stop_worker(worker)
        c.close()
    proc = covey(server, "transcript", handle.id, "root")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[1].startswith("  no transcript (no model call yet, COVEY_TRANSCRIPTS=off")


@pytest.mark.slow
def test_a_step_killed_after_its_tool_is_rerun_without_a_duplicate_entry(tmp_path):
    """The first call is slow enough that its entry is written while the step runs
    (with its spend); the worker dies after the tool. The rerun replays the call and
    the tool and records them again: each entry is kept once, counted once."""
    from tests.integration.test_lost_messages import died, finished_by_another, killed_at

    counter = tmp_path / "runs.txt"
    env = {"COVEY_TOOLS": TOOLS, "PYTHONPATH": str(ROOT)}
    with RedisServer() as server, closing(Client(Settings(redis_url=server.url))) as client:
        first = killed_at(server, client, "after_tool:kill", **env)
        task = f'[sim:latency 1200] Count. [sim:call tally {{"path": "{counter}"}}]'
        handle = client.submit(client.spec(task, tools=called(task)))
        died(first)
        assert [e.kind for e in handle.transcript().events] == ["model"]  # written before the kill
        result = finished_by_another(server, handle, 120, **env)
        t = handle.transcript()
        stored = client.redis.hgetall(f"covey:{{{handle.id}}}:transcript:root")
    assert result.ok and len(counter.read_text().splitlines()) == 1
    assert [(e.kind, e.cycle) for e in t.events] == [("model", 1), ("tool", 1), ("model", 2)]
    assert t.events[1].latency_ms is None  # the rerun replayed the tool's result: it did not run it
    assert t.bytes == sum(len(k) + len(v) for k, v in stored.items() if k[0].isdigit())
