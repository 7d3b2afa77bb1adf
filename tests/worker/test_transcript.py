"""What the loop records of an agent's conversation, on a real Redis and the sim, without Celery."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.config.settings import Settings
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.store.transcripts import ModelCallEvent, ToolCallEvent, Transcripts
from covey.worker import loop, redaction
from covey.worker.deps import Deps
from tests.worker.test_loop import dies_in_call, run_again

FAKE_KEY = "test-key-" + "k" * 40  # no provider prefix: only its exact value can mask it
FAKE_SECRET = "covey-signing-" + "s" * 30


def deps_of(redis_server, **settings) -> Deps:
    deps = Deps.from_settings(Settings(redis_url=redis_server.url, model_retries=0, **settings))
    redaction.hold(deps.secrets)  # as a worker process holds its own (worker_deps)
    return deps


@pytest.fixture
def deps(redis_server):
    return deps_of(redis_server)


def start(deps: Deps, task: str, **fields):
    ctx = RunContext(job_id=f"tr-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_tokens=20_000))
    spec = AgentSpec(task=task, **fields)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    return ctx, spec


def run(deps: Deps, task: str, **fields):
    ctx, spec = start(deps, task, **fields)
    out = loop.advance(deps, *loop.begin(deps, ctx, spec))
    return out, Transcripts(deps.redis).read(ctx.job_id, "root")


def test_each_call_records_what_it_added_to_the_conversation_and_what_came_back(deps):
    out, t = run(deps, "What is 2 * 21?")
    assert out.result.output == "42"
    first, tool, second = t.events
    assert isinstance(first, ModelCallEvent) and isinstance(tool, ToolCallEvent) and isinstance(second, ModelCallEvent)
    assert [m["role"] for m in first.sent] == ["system", "user"] and not first.continues
    assert first.sent[1]["content"] == "What is 2 * 21?"
    assert first.finish_reason == "tool_calls" and first.reply["tool_calls"][0]["name"] == "calculator"
    assert (tool.tool, tool.result, tool.error, tool.call_id) == (
        "calculator",
        "42",
        False,
        first.reply["tool_calls"][0]["id"],
    )
    # The second call sent only what the first did not: the assistant's call and the tool's result.
    assert second.continues and [m["role"] for m in second.sent] == ["assistant", "tool"]
    assert second.sent[1]["content"] == "42"
    assert first.model == second.model == "sim" and first.params["max_completion_tokens"] == 4096
    assert all(e.latency_ms is not None and e.latency_ms >= 0 and e.at is not None for e in t.events)
    calls = [first, second]
    assert sum(e.usage.total_tokens for e in calls) == out.result.usage.total_tokens
    assert len(calls) == out.result.usage.cycles


def test_a_failed_call_is_recorded_with_its_error(deps):
    out, t = run(deps, "[sim:fail 500] What is 1 + 1?")
    assert out.result.status == "failed"
    (call,) = t.events
    assert call.error == out.result.error and call.reply is None


def test_off_records_nothing(redis_server):
    deps = deps_of(redis_server, transcripts=False)
    ctx, spec = start(deps, "What is 2 * 21?")
    out = loop.advance(deps, *loop.begin(deps, ctx, spec))
    assert out.result.output == "42"
    assert not deps.redis.exists(keys.transcript(ctx.job_id, "root"))


def test_the_workers_secrets_are_masked_wherever_they_appear(redis_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    deps = deps_of(redis_server, secret=FAKE_SECRET)
    task = f"My key is {FAKE_KEY} and the secret {FAKE_SECRET}; Authorization: Bearer abcdefgh12345678. What is 2 + 2?"
    out, t = run(deps, task)
    assert out.result.output == "4"
    stored = "\n".join(deps.redis.hvals(keys.transcript(out.result.job_id, "root")))
    assert FAKE_KEY not in stored and FAKE_SECRET not in stored and "abcdefgh12345678" not in stored
    assert "My key is *** and the secret ***; Authorization: ***" in t.events[0].sent[1]["content"]


def test_a_rerun_step_adds_nothing_twice(deps):
    """The first run writes its first call's entry (a second has passed: the spend
    record carries it), then dies in its second call; the rerun replays the first
    call and the tool and records the same entries again."""
    clock = itertools.count()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    deps.now = lambda: t0 + timedelta(seconds=2 * next(clock))
    ctx, spec = start(deps, "What is 2 * 21?")
    dies_in_call(deps, ctx, spec, 2)
    before = Transcripts(deps.redis).read(ctx.job_id, "root")
    assert [e.kind for e in before.events] == ["model"]

    out, _ = run_again(deps, ctx, spec)
    assert out.result.output == "42"
    t = Transcripts(deps.redis).read(ctx.job_id, "root")
    assert [(e.kind, e.cycle) for e in t.events] == [("model", 1), ("tool", 1), ("model", 2)]
    assert t.events[0] == before.events[0]  # the replay rebuilt it as it was: latency and time too
    stored = deps.redis.hgetall(keys.transcript(ctx.job_id, "root"))
    assert t.bytes == sum(len(k) + len(v) for k, v in stored.items() if k[0].isdigit())


def test_a_small_cap_keeps_the_first_calls_and_says_where_it_cut(redis_server):
    deps = deps_of(redis_server, transcript_bytes=1024)
    out, t = run(deps, "What is 2 * 21? " + "pad " * 200)
    assert out.result.output == "42"
    assert t.cut is not None and t.cut.at == "call 1" and t.cut.entries == 3 and t.cut.bytes > 1024
    assert t.events == [] and t.bytes == 0


def test_an_mcp_servers_header_value_is_masked_with_or_without_its_scheme(redis_server, monkeypatch, tmp_path):
    token = "mcp-token-" + "t" * 24
    monkeypatch.setenv("MCP_TOKEN", f"Token {token}")
    servers = tmp_path / "servers.toml"
    servers.write_text('[servers.remote]\nurl = "http://127.0.0.1:9/mcp"\nheaders = { Authorization = "MCP_TOKEN" }\n')
    deps = deps_of(redis_server, mcp=servers)
    out, t = run(deps, f"The token is {token}. What is 2 + 2?")
    assert out.result.output == "4"
    assert t.events[0].sent[1]["content"] == "The token is ***. What is 2 + 2?"
