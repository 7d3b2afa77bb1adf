"""Storing a result through covey's configured result store (``covey.config.backend``):
one atomic round trip that keeps a stored success, publishes the result to the
clients waiting on it and gives the key its expiry."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import redis
from celery import Celery, states

from covey.config.celery import create_app
from covey.config.settings import Settings
from covey.redis_scripts import run
from tests.redis_server import RedisServer
from tests.sentinels import MASTER, SentinelRedis


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:  # private: the tests reset its stats and flush its scripts
        yield s


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(server.url, decode_responses=True) as c:
        yield c


def app_on(settings: Settings, **conf: object) -> Celery:
    app = create_app(settings)
    app.conf.update(conf)
    return app


@pytest.fixture
def app(server: RedisServer) -> Iterator[Celery]:
    app = app_on(Settings(redis_url=server.url))
    yield app
    app.close()


def stored(app: Celery, client: redis.Redis, task_id: str) -> dict:
    return json.loads(client.get(app.backend.get_key_for_task(task_id)))


def new_id() -> str:
    return str(uuid.uuid4())


def test_a_stored_success_is_kept_against_a_later_failure_or_success(app, client):
    task_id = new_id()
    app.backend.mark_as_done(task_id, "first")
    app.backend.store_result(task_id, ValueError("a duplicate run failed"), states.FAILURE)
    assert app.backend.store_result(task_id, "second", states.SUCCESS) == "second"  # returned, stored or not
    meta = stored(app, client, task_id)
    assert (meta["status"], meta["result"], meta["task_id"]) == (states.SUCCESS, "first", task_id)


@pytest.mark.parametrize("first", [states.STARTED, states.RETRY, states.FAILURE])
def test_a_state_short_of_success_is_overwritten_by_a_success(app, client, first):
    task_id = new_id()
    app.backend.store_result(task_id, ValueError("not yet") if first != states.STARTED else None, first)
    assert stored(app, client, task_id)["status"] == first
    app.backend.mark_as_done(task_id, {"output": 42})
    assert stored(app, client, task_id)["result"] == {"output": 42}
    assert app.backend.get_task_meta(task_id, cache=False)["status"] == states.SUCCESS


def test_a_value_that_is_not_json_meta_is_replaced(app, client):
    task_id = new_id()
    client.set(app.backend.get_key_for_task(task_id), "\x80 not json")
    app.backend.mark_as_done(task_id, "readable")
    assert stored(app, client, task_id)["result"] == "readable"


def test_a_result_is_published_on_the_tasks_channel_and_a_kept_success_is_not(app, client):
    task_id = new_id()
    key = app.backend.get_key_for_task(task_id).decode()
    with client.pubsub() as sub:
        sub.subscribe(key)
        assert sub.get_message(timeout=5)["type"] == "subscribe"
        app.backend.mark_as_done(task_id, "done")
        message = sub.get_message(timeout=5)
        assert message["channel"] == key
        assert json.loads(message["data"])["result"] == "done"
        app.backend.mark_as_done(task_id, "again")
        assert sub.get_message(timeout=0.5) is None


def test_the_key_expires_after_result_expires(app, client):
    task_id = new_id()
    app.backend.mark_as_done(task_id, "done")
    assert 0 < client.ttl(app.backend.get_key_for_task(task_id)) <= app.conf.result_expires


def test_without_result_expires_the_key_is_kept(server, client):
    app = app_on(Settings(redis_url=server.url), result_expires=None)
    task_id = new_id()
    app.backend.mark_as_done(task_id, "kept")
    assert client.ttl(app.backend.get_key_for_task(task_id)) == -1
    assert stored(app, client, task_id)["result"] == "kept"


def test_a_compressed_store_takes_celerys_own_path_and_keeps_a_stored_success(server):
    app = app_on(Settings(redis_url=server.url), result_compression="gzip")  # not JSON the script could read
    task_id = new_id()
    app.backend.mark_as_done(task_id, "first")
    app.backend.mark_as_done(task_id, "second")
    assert app.backend.get_task_meta(task_id, cache=False)["result"] == "first"


def test_a_store_is_one_round_trip(app, client, server):
    """MONITOR tells the backend's own commands from those its script runs ("lua")."""
    app.backend.mark_as_done(new_id(), "warm")  # loads the script and opens the connection
    marker = redis.Redis.from_url(server.url)
    marker.ping()  # connected before MONITOR starts: only its ECHO shows
    task_id = new_id()
    with client.monitor() as monitor:
        app.backend.mark_as_done(task_id, "done")
        marker.echo("end of the store")
        sent, scripted = [], []
        while not (command := monitor.next_command())["command"].startswith("ECHO"):
            name = command["command"].split()[0].upper()
            (scripted if command["client_type"] == "lua" else sent).append(name)
    marker.close()
    assert [c for c in sent if c != "PING"] == ["EVALSHA"]  # a health check may ping first
    assert scripted == ["GET", "SET", "PUBLISH"]


def test_the_script_is_loaded_again_after_a_script_flush(app, client):
    app.backend.mark_as_done(new_id(), "before")
    client.script_flush()  # as a Redis restart loses every script
    task_id = new_id()
    app.backend.mark_as_done(task_id, "after")
    assert stored(app, client, task_id)["result"] == "after"


def test_the_sentinel_store_keeps_a_stored_success():
    with SentinelRedis() as topology:
        app = app_on(Settings(redis_url=topology.url, redis_master=MASTER))
        task_id = new_id()
        app.backend.mark_as_done(task_id, "first")
        app.backend.store_result(task_id, ValueError("a duplicate run failed"), states.FAILURE)
        with redis.Redis(port=topology.master().port, decode_responses=True) as master:
            assert stored(app, master, task_id)["result"] == "first"
        app.close()


def test_a_guarded_store_writes_only_while_the_callers_record_stands(app, client):
    """``storing``: a result that rides in the round trip of the record it goes with,
    stored only if that record is the one written (a duplicate run's end is not)."""
    mine, theirs = new_id(), new_id()
    client.hset("ends", mapping={mine: "my end", theirs: "an earlier end"})
    with client.pubsub() as waiting:
        waiting.subscribe(app.backend.get_key_for_task(mine))
        waiting.get_message(timeout=1)  # the subscription's own reply
        calls = [
            app.backend.storing(task_id, {"output": 42}, None, ("ends", task_id, "my end"))
            for task_id in (mine, theirs)
        ]
        assert run(app.backend.client, calls) == [1, 0]
        published = waiting.get_message(timeout=5)
    assert stored(app, client, mine)["result"] == {"output": 42}
    assert json.loads(published["data"])["status"] == "SUCCESS"
    assert client.get(app.backend.get_key_for_task(theirs)) is None
    assert 0 < client.ttl(app.backend.get_key_for_task(mine)) <= app.conf.result_expires
