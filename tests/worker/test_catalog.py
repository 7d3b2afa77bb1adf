"""A worker's catalog entry: schema digests, no secret published, and a heartbeat
that keeps the entry alive past its TTL and withdraws it when the worker stops."""

from __future__ import annotations

import time

from covey import keys
from covey.config.settings import Settings
from covey.models.catalog import ServedModel
from covey.store.catalog import WorkerCatalog
from covey.worker import catalog as worker_catalog
from covey.worker.catalog import digest, entry, heartbeat, served_tools

CALCULATOR = next(t for t in served_tools() if t.name == "calculator")


def test_a_digest_tells_schemas_apart_whatever_their_key_order():
    schema = CALCULATOR.schema()
    reordered = {"function": dict(reversed(list(schema["function"].items()))), "type": "function"}
    assert digest(reordered) == digest(schema)
    changed = {**schema, "function": {**schema["function"], "description": "something else"}}
    assert digest(changed) != digest(schema)


def test_the_entry_lists_every_built_in_and_publishes_no_secret():
    model = ServedModel(
        name="fast",
        endpoint="https://ops:hunter22@models.internal/v1",
        model="gpt-x",
        key_env="FAST_KEY",
        key_set=True,
        params={"token": "api_key=sk-0123456789abcdef"},
    )
    published = entry("w@h", ["covey"], served_tools(), [model]).model_dump_json()
    assert "hunter22" not in published and "0123456789abcdef" not in published
    listed = entry("w@h", ["covey"], served_tools(), [model])
    assert [t.name for t in listed.tools] == [t.name for t in served_tools()]
    assert {t.digest for t in listed.tools if t.name == "calculator"} == {digest(CALCULATOR.schema())}
    assert listed.models[0]["endpoint"] == "https://ops:***@models.internal/v1"


def test_a_heartbeat_refreshes_its_entry_and_withdraws_it_on_stop(redis_server, redis_client):
    settings = Settings(redis_url=redis_server.url, catalog_ttl=1.5)
    beat = heartbeat(settings, "beating@h", ["covey"], served_tools)
    beat.start()
    try:
        key, refreshes, last = keys.catalog_entry("beating@h"), 0, None
        deadline = time.monotonic() + 60
        while refreshes < 3:  # its TTL went up again: a beat rewrote it
            assert time.monotonic() < deadline, f"{refreshes} refreshes seen"
            ttl = redis_client.pttl(key)
            refreshes += last is not None and ttl > last
            last = ttl
            time.sleep(0.05)
        assert "beating@h" in [e.worker for e in WorkerCatalog(redis_client, settings.catalog_ttl).entries()]
    finally:
        beat.stop()
    assert not redis_client.exists(keys.catalog_entry("beating@h"))


def test_a_heartbeat_that_cannot_reach_redis_says_so_and_goes_on(caplog):
    settings = Settings(redis_url="redis://127.0.0.1:1/0", catalog_ttl=0.3)
    beat = heartbeat(settings, "alone@h", ["covey"], served_tools)
    with caplog.at_level("WARNING", logger=worker_catalog.__name__):
        beat.start()
        deadline = time.monotonic() + 30
        while sum("heartbeat of alone@h failed" in r.message for r in caplog.records) < 2:
            assert time.monotonic() < deadline, "no second heartbeat"
            time.sleep(0.05)
        beat.stop()
    assert "could not withdraw alone@h" in caplog.text
