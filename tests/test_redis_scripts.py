"""Script calls in one round trip: a Redis without the scripts (restarted, failed
over, used by another covey version) gets them loaded, what ran before a refused
call does not run twice, and what ran after it runs again after it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis

import covey
from covey.redis_scripts import LUA_REPLIES, Reply, ScriptCall, run
from tests.redis_server import RedisServer

COUNT = "return redis.call('INCR', KEYS[1])"
APPEND = "return redis.call('RPUSH', KEYS[1], ARGV[1])"
LENGTH = "return redis.call('LLEN', KEYS[1])"
FAILS = "return redis.error_reply('refused: ' .. ARGV[1])"


@pytest.fixture
def client():
    with RedisServer() as server:  # its own: these tests flush its scripts
        r = redis.Redis.from_url(server.url, decode_responses=True)
        yield r
        r.close()


def test_calls_run_in_order_in_one_round_trip(client):
    append = client.register_script(APPEND)
    client.script_load(APPEND)
    client.config_resetstat()
    replies = run(client, [ScriptCall(append, ["log"], [word]) for word in ("a", "b", "c")])
    assert replies == [1, 2, 3]
    assert client.lrange("log", 0, -1) == ["a", "b", "c"]
    stats = client.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 3
    assert "cmdstat_script|exists" not in stats  # a pipeline of Scripts would have asked first


def test_scripts_a_fresh_redis_lacks_are_loaded_and_what_ran_runs_once(client):
    count, append = client.register_script(COUNT), client.register_script(APPEND)
    client.script_load(COUNT)  # loaded; APPEND is not, as after a restart that only one caller noticed
    replies = run(client, [ScriptCall(count, ["n"], []), ScriptCall(append, ["log"], ["x"])])
    assert replies == [1, 1]
    assert client.get("n") == "1"  # the call Redis ran is not run again
    assert client.lrange("log", 0, -1) == ["x"]
    client.script_flush()
    assert run(client, [ScriptCall(count, ["n"], [])]) == [2]


def test_a_call_after_a_refused_one_runs_again_after_it(client):
    append, length = client.register_script(APPEND), client.register_script(LENGTH)
    client.script_load(LENGTH)  # loaded by a worker of another version; APPEND is this version's own
    replies = run(client, [ScriptCall(append, ["log"], ["x"]), ScriptCall(length, ["log"], [])])
    assert replies == [1, 1]  # the length read after the append it follows, not before it ran
    assert client.lrange("log", 0, -1) == ["x"]


def test_a_scripts_own_error_is_raised(client):
    fails = client.register_script(FAILS)
    with pytest.raises(redis.ResponseError, match="refused: no"):
        run(client, [ScriptCall(fails, [], ["no"])])


def test_a_wait_for_replicas_answers_last(client):
    count = client.register_script(COUNT)
    assert run(client, [ScriptCall(count, ["n"], [])], wait_replicas=1, wait_ms=10) == [1, 0]  # no replica here


def test_every_script_returns_the_one_reply_table_by_name(client):
    """The constants a script is loaded with are Python's ``Reply``, and no script
    that returns a status spells one as a number (a number meant one thing in one
    script and another in the next)."""
    names = ", ".join(r.name for r in Reply)
    assert client.eval(LUA_REPLIES + f"return {{{names}}}", 0) == [r.value for r in Reply]
    scripts = list(Path(covey.__file__).parent.rglob("*.lua"))
    assert len(scripts) >= 15
    for path in scripts:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"return \{-?\d", text), f"{path.name} returns a status as a number"
