"""Which held deliveries a busy worker runs (``covey.config.deliveries``), on a real Redis."""

from __future__ import annotations

import json

import redis

from covey import keys
from covey.config.deliveries import UNACKED, beat_value, held_by_silent_workers, holders
from tests.redis_server import RedisServer


def hold(r, holder: str, task_id: str, node: str, ttl_ms: int = 6000, left_ms: int = 6000) -> None:
    """Holder ``holder`` beats (its key's TTL ``ttl_ms``, ``left_ms`` of it left) and holds ``task_id``'s delivery."""
    tag = f"tag-{task_id}"
    r.hset(UNACKED, tag, json.dumps([{"headers": {"id": task_id}}, "", "covey"]))
    r.sadd(keys.workers(), holder)
    r.sadd(keys.worker_held(holder), tag)
    r.set(keys.worker_alive(holder), beat_value("token", ttl_ms, node), px=left_ms)


def test_a_beating_worker_that_answered_no_broadcast_runs_what_it_holds():
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        hold(r, "busy", "t1", "covey-1@host")
        hold(r, "answered", "t2", "covey-2@host")
        hold(r, "stale", "t3", "covey-3@host", left_ms=2000)  # no beat for 4 of its 1 s beats
        hold(r, "no worker", "t4", "")  # a process that runs no tasks
        assert held_by_silent_workers(r, {"covey-2@host"}) == {"t1"}
        fresh = {h.id: h.fresh for h in holders(r)}
        assert fresh == {"busy": True, "answered": True, "stale": False, "no worker": True}
        r.close()
