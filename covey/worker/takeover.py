"""Putting a dead worker process's deliveries back on their queues at once.

kombu's Redis transport restores an unacknowledged delivery only once it is
older than the visibility timeout (minutes: it must exceed the longest task),
so a killed worker's agents would sit that long. Here each worker process keeps
a heartbeat (``covey.worker.heartbeat``) and the set of deliveries it holds
(``covey.config.holder``). A thread in every worker beats and, under a Redis
lock, looks for holders whose heartbeat has lapsed: their deliveries go back to
the head of their queues in one transaction that also drops them from kombu's
unacknowledged records, watched so that two takers never both put one back and
a holder that beats again in the meantime keeps its own. Each goes back under
a new delivery tag, so a late ack from the old holder finds nothing to remove.
The visibility timeout stays the last resort, for a delivery no holder recorded.

A live process puts back its own orphans the same way, at its heartbeat: the
deliveries kombu failed to give back when the broker connection dropped.

A step checks that its delivery is still its process's (``still_held``) when it
starts, before each step of its loop, and again just before it sends a model
call or runs its tools (a process paused in between learns it there); one taken
from it is dropped: the worker that took it runs it, and what this one already
settled replays there.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads
from redis.exceptions import WatchError

from covey import keys
from covey.config import connections, holder
from covey.config.deliveries import BEATS_PER_TTL, UNACKED, dead_holders
from covey.config.settings import Settings, get_settings
from covey.worker.heartbeat import Heartbeat

log = logging.getLogger(__name__)

ATTEMPTS = 20  # transactions a busy broker may abort (an ack elsewhere) before the next pass retries


def take_over(channel: Any, dead: str) -> int | None:
    """Put holder ``dead``'s deliveries back on their queues (kombu's restore, for
    its routing and redelivered flag) and forget the holder. Returns how many went
    back, 0 when it beats again, None when the broker stayed too busy this pass."""
    alive, held = keys.worker_alive(dead), keys.worker_held(dead)

    def take(pipe: Any) -> int:
        if pipe.exists(alive):
            return 0
        tags = sorted(pipe.smembers(held))
        records = pipe.hmget(channel.unacked_key, tags) if tags else []
        pipe.multi()
        _put_back(channel, pipe, tags, records)
        pipe.delete(held).srem(keys.workers(), dead)
        pipe.execute()
        return sum(record is not None for record in records)

    return _watched(channel.client, [alive, held, channel.unacked_key], take)


def _watched(client: redis.Redis, watched: list[str], body: Callable[[Any], int]) -> int | None:
    """``body(pipe)`` with ``watched`` under WATCH, run again when another client writes
    one of them first, ATTEMPTS times at most; None when the broker stayed that busy."""
    for _ in range(ATTEMPTS):
        with client.pipeline() as pipe:
            try:
                pipe.watch(*watched)
                return body(pipe)
            except WatchError:
                continue
    return None


def _put_back(channel: Any, pipe: Any, tags: list[str], records: list[bytes | None]) -> None:
    """In ``pipe``'s transaction: drop deliveries ``tags`` from kombu's unacknowledged
    records and put each recorded one back at the head of its queue."""
    for tag, record in zip(tags, records):
        pipe.zrem(channel.unacked_index_key, tag).hdel(channel.unacked_key, tag)
        if record is not None:  # else acknowledged, or restored by kombu already
            message, exchange, routing_key = loads(bytes_to_str(record))
            # kombu would restore the message under its old tag: the old
            # holder's late ack would then delete the record of its next delivery.
            message["properties"]["delivery_tag"] = str(uuid.uuid4())
            channel._do_restore_message(message, exchange, routing_key, pipe)


def put_back_orphans(channel: Any, me: holder.Holder) -> int | None:
    """Put this process's orphans back on their queues (``covey.config.holder``): the
    deliveries kombu failed to give back when the broker connection dropped. Returns
    how many went back, None when the broker stayed too busy this pass. A copy of a
    step still running here is dropped by the step (``covey.worker.tasks``), as when
    kombu's own give-back succeeds."""
    tags = sorted(me.orphans)
    if not tags:
        return 0

    def give_back(pipe: Any) -> int:
        records = pipe.hmget(channel.unacked_key, tags)
        pipe.multi()
        _put_back(channel, pipe, tags, records)
        pipe.srem(keys.worker_held(me.id), *tags)
        pipe.execute()
        me.put_back(tags)
        return sum(record is not None for record in records)

    return _watched(channel.client, [channel.unacked_key], give_back)


def keep_lease(client: redis.Redis, key: str, token: str, seconds: float) -> bool:
    """Take the lock ``key``, or keep it if ``token`` holds it; True while this worker holds it."""
    mine = bytes_to_str(client.get(key) or b"") == token
    return bool(client.set(key, token, px=int(seconds * 1000), nx=not mine, xx=mine))


def _take_from_the_dead(client: redis.Redis, channel: Any, me: str) -> None:
    for dead in dead_holders(client, me):
        taken = take_over(channel, dead)
        if taken is None:
            log.warning("worker %s stopped beating; the broker was too busy to take its deliveries: next pass", dead)
        elif taken:
            log.warning("worker %s stopped beating: %d of its deliveries put back on their queues", dead, taken)


def _loop(settings: Settings, app: Celery, heartbeat: Heartbeat, client: redis.Redis) -> None:
    me, token, channel, away = heartbeat.holder.id, uuid.uuid4().hex, None, False
    while True:
        try:
            heartbeat.beat()
            channel = channel or app.connection_for_write().default_channel  # the broker's key names, routing
            if back := put_back_orphans(channel, heartbeat.holder):
                log.warning("worker %s: %d of its deliveries, let go of with the broker away, put back", me, back)
            if keep_lease(client, keys.takeover_lock(), token, settings.worker_heartbeat_seconds):
                _take_from_the_dead(client, channel, me)
            away = False
        except (redis.ConnectionError, redis.TimeoutError) as e:
            if not away:  # one line an outage, not one a beat
                log.warning("heartbeat: the broker's Redis is unreachable (%s); beating again when it answers", e)
            away = True
        except Exception:  # a malformed record, a bug: beat and look again next time, say why now
            log.exception("heartbeat: this beat failed")
        time.sleep(settings.worker_heartbeat_seconds / BEATS_PER_TTL)


_mine: Heartbeat | None = None  # this process's, once its thread runs
_step = threading.local()


def _client(settings: Settings) -> redis.Redis:
    """A client that gives up on a silent link in seconds (the broker's own sockets wait
    two minutes): a beat stuck past its TTL only delays learning what was taken."""
    return connections.client(
        settings.broker,
        settings.redis_master,
        socket_timeout=connections.SOCKET_TIMEOUT_SECONDS,
        socket_connect_timeout=connections.CONNECT_TIMEOUT_SECONDS,
    )


@lru_cache(maxsize=1)
def _broker_of(pid: int) -> redis.Redis:
    """A prefork child's own client (made after the fork: ``pid`` keys it)."""
    return _client(get_settings())


def taking_up(request: Any) -> None:
    """Note the delivery the running step took up (its tag), for ``still_held``."""
    _step.tag = (getattr(request, "properties", None) or {}).get("delivery_tag")


def unacknowledged(tag: str) -> bool:
    """Whether the broker still holds delivery ``tag`` unacknowledged: a worker runs it,
    or will (its takeover puts it back under a new tag once its holder's heartbeat
    lapses). False once it was acknowledged or put back."""
    return bool(_broker_of(os.getpid()).hexists(UNACKED, tag))


def still_held() -> bool:
    """Whether the running step's delivery is still this process's: False once another
    worker put it back on its queue. The process that consumed it knows without a
    round trip while its heartbeat stands; a prefork child asks the broker whether
    it is still unacknowledged."""
    tag = getattr(_step, "tag", None)
    if tag is None or not get_settings().redis_broker:  # outside a worker, or a broker that redelivers itself
        return True
    beating, mine = _mine, holder.existing()
    try:
        if beating is not None and mine is beating.holder:
            return not beating.taken(tag)
        return unacknowledged(tag)
    except (redis.ConnectionError, redis.TimeoutError):
        return True  # cut off: the step's own writes wait the outage out, and the next check asks again


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    """A thread in the process that consumes: its own connections, made here."""
    global _mine
    settings = get_settings()
    if not settings.redis_broker:
        return  # another broker redelivers a dead consumer's messages itself
    client = _client(settings)
    _mine = Heartbeat(
        client, holder.current(), settings.worker_heartbeat_seconds, settings.redelivery_seconds, sender.hostname
    )
    threading.Thread(
        target=_loop, args=(settings, sender.app, _mine, client), name="covey-heartbeat", daemon=True
    ).start()
