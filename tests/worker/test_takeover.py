"""Taking a dead worker process's deliveries back, against a real redis-server and
kombu's Redis channel: once, only from the dead, and known to a holder that wakes."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from kombu import Connection, Exchange, Queue

from covey import keys
from covey.config import broker, holder
from covey.config.deliveries import dead_holders, holder_of
from covey.worker.heartbeat import Heartbeat
from covey.worker.takeover import put_back_orphans, take_over
from tests.cut_link import CutLink
from tests.redis_server import RedisServer

QUEUE = Queue("jobs", Exchange("jobs", "direct"), "jobs")


@pytest.fixture
def server():
    with RedisServer() as made:
        yield made


@pytest.fixture
def connections(server):
    """Two broker connections: this process consumes on the first; a taker uses the second."""
    with (
        Connection(server.url, transport=broker.transport(server.url)) as mine,
        Connection(server.url, transport=broker.transport(server.url)) as taker,
    ):
        yield mine, taker


def delivered(conn: Connection, task_id: str):
    """A message published and then consumed here, not yet acknowledged."""
    conn.Producer().publish(
        {"n": task_id}, exchange=QUEUE.exchange, routing_key="jobs", declare=[QUEUE], headers={"id": task_id}
    )
    message = conn.default_channel.basic_get("jobs", no_ack=False)
    assert message is not None
    return message


def queued(client: redis.Redis) -> list[str]:
    return client.lrange("jobs", 0, -1)


def test_a_dead_holder_s_delivery_goes_back_once_and_its_late_ack_is_harmless(server, connections):
    mine, taker = connections
    client = redis.Redis.from_url(server.url, decode_responses=True)
    message = delivered(mine, "t1")
    me = holder.current().id
    assert client.smembers(keys.worker_held(me)) == {message.delivery_tag}

    assert take_over(taker.default_channel, me) == 1  # no heartbeat: dead
    assert take_over(taker.default_channel, me) == 0  # a second taker finds nothing to put back
    assert len(queued(client)) == 1 and client.hlen("unacked") == 0 and client.zcard("unacked_index") == 0
    assert not client.exists(keys.worker_held(me))

    again = taker.default_channel.basic_get("jobs", no_ack=False)
    assert again.headers["id"] == "t1" and again.headers["redelivered"] is True
    message.ack()  # the old holder's ack, late: the taker's delivery stays recorded
    assert client.hkeys("unacked") == [again.delivery_tag]


def test_a_beating_holder_keeps_its_deliveries(server, connections):
    mine, taker = connections
    client = redis.Redis.from_url(server.url)
    message = delivered(mine, "t2")
    me = holder.current()
    Heartbeat(client, me, seconds=30, kept_seconds=60).beat()

    assert me.id not in dead_holders(client, "another")
    assert take_over(taker.default_channel, me.id) == 0
    assert client.hexists("unacked", message.delivery_tag) and client.llen("jobs") == 0


def test_a_delivery_s_holder_is_named_with_whether_it_beats(server, connections):
    """What a wait says of a delivery no step runs: no holder until one beats, then
    it, alive, then lapsed."""
    client = redis.Redis.from_url(server.url)
    tag = delivered(connections[0], "t6").delivery_tag
    assert holder_of(client, tag) is None  # recorded, but no beat: no holder a taker knows
    me = holder.current()
    Heartbeat(client, me, seconds=0.2, kept_seconds=60).beat()
    assert holder_of(client, tag) == (me.id, True)
    deadline = time.monotonic() + 30
    while client.exists(keys.worker_alive(me.id)):
        assert time.monotonic() < deadline, "the heartbeat never lapsed"
        time.sleep(0.05)
    assert holder_of(client, tag) == (me.id, False)
    assert holder_of(client, "no such tag") is None


def taken_while_silent(server, connections, task_id: str):
    """A holder beating every 0.2 s delivered a message, fell silent, and had it taken.
    Returns its heartbeat, the Redis client and the delivery taken."""
    mine, taker = connections
    client = redis.Redis.from_url(server.url)
    me = holder.current()
    heartbeat = Heartbeat(client, me, seconds=0.2, kept_seconds=60)
    heartbeat.beat()
    message = delivered(mine, task_id)
    assert not heartbeat.taken(message.delivery_tag)
    deadline = time.monotonic() + 30
    while client.exists(keys.worker_alive(me.id)):
        assert time.monotonic() < deadline, "the heartbeat never lapsed"
        time.sleep(0.05)
    assert me.id in dead_holders(client, "another")
    assert take_over(taker.default_channel, me.id) == 1
    return heartbeat, client, message


def test_a_holder_that_beats_again_knows_which_deliveries_were_taken(server, connections):
    heartbeat, _, first = taken_while_silent(server, connections, "t3")
    again = connections[0].default_channel.basic_get("jobs", no_ack=False)  # delivered here again
    assert again.headers["id"] == "t3" and again.delivery_tag != first.delivery_tag
    assert heartbeat.taken(first.delivery_tag)  # the copy delivered before the lapse is dropped
    assert not heartbeat.taken(again.delivery_tag)  # the new delivery is this process's


def test_a_beat_that_reaches_redis_late_does_not_hide_a_takeover(server, connections):
    """A beat that timed out in a partition may still land when the link returns: the
    key then stands again, but not with the token of the last beat answered."""
    heartbeat, client, message = taken_while_silent(server, connections, "t5")
    client.set(keys.worker_alive(heartbeat.holder.id), "a beat whose reply was lost", px=30_000)  # landed late
    assert heartbeat.taken(message.delivery_tag)


def test_a_delivery_recorded_as_redis_went_away_goes_back_once_it_answers(server, connections):
    """The delivery's record was written, its reply lost: Celery never sees the
    message, so this live holder must put it back itself, not leave it held."""
    _, taker = connections
    client = redis.Redis.from_url(server.url, decode_responses=True)
    taker.Producer().publish({"n": "t6"}, exchange=QUEUE.exchange, routing_key="jobs", declare=[QUEUE])
    link = CutLink(server.port, cut_after=b"EXEC")
    try:
        with Connection(link.url, transport=broker.transport(link.url)) as cut:
            with pytest.raises(cut.connection_errors):
                cut.default_channel.basic_get("jobs", no_ack=False)
    finally:
        link.close()
    assert link.cut.is_set() and client.hlen("unacked") == 1 and client.llen("jobs") == 0  # recorded, reply lost

    assert put_back_orphans(taker.default_channel, holder.current()) == 1
    assert client.hlen("unacked") == 0 and not client.exists(keys.worker_held(holder.current().id))
    again = taker.default_channel.basic_get("jobs", no_ack=False)
    assert again.payload == {"n": "t6"} and again.headers["redelivered"] is True


def test_a_delivery_recorded_while_a_lapsed_beat_is_on_its_way_is_not_taken(server, connections):
    """The first beat after a lapse (and every process's first) reads what Redis holds
    for it; a delivery recorded after that read and before its reply arrives is missing
    from the reply, yet no one took it: its step must not be dropped."""
    mine, _ = connections
    client = redis.Redis.from_url(server.url)
    link = CutLink(server.port)
    me = holder.current()
    heartbeat = Heartbeat(redis.Redis.from_url(link.url), me, seconds=30, kept_seconds=60)
    try:
        heartbeat.beat()  # connected, its script loaded
        client.delete(keys.worker_alive(me.id))  # a lapse
        link.hold()
        beating = threading.Thread(target=heartbeat.beat)
        beating.start()
        deadline = time.monotonic() + 30
        while not client.exists(keys.worker_alive(me.id)):  # the beat ran in Redis; its reply waits
            assert time.monotonic() < deadline, "the beat never reached Redis"
            time.sleep(0.01)
        message = delivered(mine, "t7")
        link.release()
        beating.join(timeout=30)
    finally:
        link.close()
    assert not beating.is_alive()
    assert not heartbeat.taken(message.delivery_tag)
    assert client.sismember(keys.worker_held(me.id), message.delivery_tag)
