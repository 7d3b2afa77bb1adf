"""The workers' catalog on a real Redis: entries lapse with their heartbeat, are
read by queue, and say which tools are served by whom."""

from __future__ import annotations

import time

import pytest

from covey import keys
from covey.store.catalog import (
    NoWorkerServes,
    ServedStrategy,
    ServedTool,
    WorkerCatalog,
    WorkerEntry,
    check_strategy,
    check_workers_serve,
    listed_models,
    listed_tools,
    serves_model,
)

SIM = {"name": "sim", "endpoint": "in-process", "model": "sim", "key_env": None, "key_set": None, "params": {}}


def tool(name: str, digest: str = "d1", origin: str = "builtin") -> ServedTool:
    return ServedTool(name=name, origin=origin, description=f"{name} things", digest=digest)


def entry(worker: str, tools: list[ServedTool], queues: list[str] | None = None, models=None) -> WorkerEntry:
    return WorkerEntry(worker=worker, queues=queues or ["covey"], tools=tools, models=models or [SIM])


def mine(catalog: WorkerCatalog, queue: str | None = None) -> list[str]:
    """The workers this module published (a live worker of another test may publish too)."""
    return [e.worker for e in catalog.entries(queue) if e.worker.endswith("@h")]


def gone_within(catalog: WorkerCatalog, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not mine(catalog):
            return True
        time.sleep(0.05)
    return False


def test_an_entry_is_read_back_by_queue_and_lapses_without_a_heartbeat(redis_client):
    catalog = WorkerCatalog(redis_client, ttl=0.3)
    catalog.publish(entry("a@h", [tool("calculator")], queues=["covey", "covey-sweeps"]))
    catalog.publish(entry("b@h", [tool("lookup")], queues=["other"]))
    assert mine(catalog) == ["a@h", "b@h"]
    assert mine(catalog, "covey-sweeps") == ["a@h"]
    assert catalog.entries("nobody-reads-this") == []
    assert 0 < redis_client.pttl(keys.catalog_entry("a@h")) <= 300
    assert gone_within(catalog, 30)


def test_publishing_drops_lapsed_workers_from_the_index(redis_client):
    WorkerCatalog(redis_client, ttl=0.1).publish(entry("dead@h", [tool("calculator")]))
    live = WorkerCatalog(redis_client, ttl=5)
    deadline = time.monotonic() + 30
    while redis_client.exists(keys.catalog_entry("dead@h")) and time.monotonic() < deadline:
        time.sleep(0.05)
    live.publish(entry("live@h", [tool("calculator")]))
    index = redis_client.smembers(keys.catalog_workers())
    live.withdraw("live@h")
    assert "live@h" in index and "dead@h" not in index


def test_a_worker_with_a_short_ttl_never_hides_one_with_a_long_ttl(redis_client):
    long, short = WorkerCatalog(redis_client, ttl=30), WorkerCatalog(redis_client, ttl=0.1)
    long.publish(entry("long@h", [tool("calculator")]))
    short.publish(entry("short@h", [tool("calculator")]))
    deadline = time.monotonic() + 30
    while redis_client.exists(keys.catalog_entry("short@h")):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)  # past the short TTL again: an index that took it would be gone now
    listed = mine(long)
    long.withdraw("long@h")
    assert listed == ["long@h"]


def test_a_withdrawn_entry_is_gone_at_once_and_an_unreadable_one_is_skipped(redis_client):
    catalog = WorkerCatalog(redis_client, ttl=5)
    catalog.publish(entry("a@h", [tool("calculator")]))
    catalog.publish(entry("b@h", [tool("calculator")]))
    catalog.withdraw("a@h")
    redis_client.set(keys.catalog_entry("b@h"), '{"worker": "b@h", "from": "another version"}', ex=5)
    assert mine(catalog) == []
    catalog.withdraw("b@h")


def test_a_tool_no_worker_on_the_queue_serves_is_named_with_what_is_served():
    entries = [entry("a@h", [tool("calculator"), tool("read_file")]), entry("b@h", [tool("lookup_weather")])]
    check_workers_serve(entries, ["lookup_weather", "calculator"], "covey")
    with pytest.raises(NoWorkerServes) as e:
        check_workers_serve(entries, ["calculator", "teleport", "warp", "teleport"], "covey")
    assert str(e.value) == (
        "tools 'teleport', 'warp' are served by no worker on queue 'covey'; "
        "served: calculator, lookup_weather, read_file"
    )
    check_workers_serve([], ["teleport"], "covey")  # no worker publishing: nothing is known to refuse


def test_a_misspelt_tool_or_model_is_refused_with_the_closest_served_name():
    entries = [entry("a@h", [tool("calculator")])]
    with pytest.raises(NoWorkerServes, match="; served: calculator; did you mean 'calculator'\\?$"):
        check_workers_serve(entries, ["calculater"], "covey")
    check_workers_serve(entries, [], "covey", model="sim")
    with pytest.raises(NoWorkerServes) as e:
        check_workers_serve(entries, [], "covey", model="simm")
    assert str(e.value) == "model 'simm' is served by no worker on queue 'covey'; served: sim; did you mean 'sim'?"


def test_listing_groups_workers_by_tool_and_shows_two_schemas_of_one_name_apart():
    entries = [
        entry("a@h", [tool("calculator"), tool("lookup", digest="old")], queues=["covey"]),
        entry("b@h", [tool("calculator"), tool("lookup", digest="new")], queues=["covey-sweeps"]),
    ]
    rows = [(r.name, r.digest, r.workers, r.queues) for r in listed_tools(entries)]
    assert rows == [
        ("calculator", "d1", ["a@h", "b@h"], ["covey", "covey-sweeps"]),
        ("lookup", "new", ["b@h"], ["covey-sweeps"]),
        ("lookup", "old", ["a@h"], ["covey"]),
    ]


def test_models_merge_equal_rows_and_a_default_endpoint_serves_any_name():
    fast = {**SIM, "name": "fast", "endpoint": "http://127.0.0.1:1/v1", "key_env": "K", "key_set": True}
    unset = {**fast, "key_set": False}
    entries = [entry("a@h", [], models=[SIM, fast]), entry("b@h", [], models=[SIM, unset])]
    assert [(r["name"], r["key_set"], r["workers"]) for r in listed_models(entries)] == [
        ("fast", True, ["a@h"]),
        ("fast", False, ["b@h"]),
        ("sim", None, ["a@h", "b@h"]),
    ]
    assert serves_model(entries, "fast") and not serves_model(entries, "gpt-9")
    assert serves_model([entry("c@h", [], models=[SIM, {**fast, "name": "*"}])], "gpt-9")


BEAM = ServedStrategy(
    name="beam",
    options={
        "type": "object",
        "properties": {"width": {"type": "integer", "minimum": 1}},
        "required": ["width"],
        "additionalProperties": False,
    },
)


def test_a_strategy_is_checked_against_the_schema_its_workers_publish():
    workers = [entry("a@h", [tool("calculator")]), entry("b@h", []).model_copy(update={"strategies": [BEAM]})]
    assert check_strategy(workers, "beam", {"width": 3}, "covey")
    refusals = {
        ("beem", ()): "strategy 'beem' is served by no worker on queue 'covey'; served: beam; did you mean 'beam'?",
        ("beam", ()): "options: 'width' is a required property (strategy 'beam')",
        ("beam", (("width", 0),)): "options.width: 0 is less than the minimum of 1 (strategy 'beam')",
        (
            "beam",
            (("width", 2), ("depth", 1)),
        ): "options: Additional properties are not allowed ('depth' was unexpected)",
    }
    for (name, options), said in refusals.items():
        with pytest.raises(NoWorkerServes) as refused:
            check_strategy(workers, name, dict(options), "covey")
        assert said in str(refused.value)


def test_workers_that_publish_no_strategies_leave_the_check_to_the_submitter():
    assert not check_strategy([entry("old@h", [tool("calculator")])], "beam", {}, "covey")
    assert not check_strategy([], "beam", {}, "covey")
