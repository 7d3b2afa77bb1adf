"""A worker's Redis client (``covey.config.connections``) against a Redis that
answers writes with READONLY, as a master demoted by a failover does to a
client whose address did not follow it: an outage that ends, not a failed write."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis

from covey.config import connections
from tests.sentinels import Node, wait_for


@pytest.fixture
def replica() -> Iterator[Node]:
    master = Node().start()
    replica = Node(replica_of=master.port)
    try:
        replica.start()
        with redis.Redis(port=replica.port) as r:
            wait_for("the replica in sync", lambda: r.info("replication")["master_link_status"] == "up")
        yield replica
    finally:
        replica.stop()
        master.stop()


def test_a_write_to_a_demoted_master_waits_until_it_is_writable_again(replica):
    client = connections.patient_client(replica.url, 1, 30)
    promote = threading.Timer(1.0, lambda: redis.Redis(port=replica.port).replicaof("NO", "ONE"))
    promote.start()
    try:
        client.set("written", "once")  # READONLY until the promotion, then written
    finally:
        promote.join()
    assert redis.Redis(port=replica.port, decode_responses=True).get("written") == "once"


def test_a_redis_that_stays_read_only_is_an_outage_once_the_allowance_ends(replica):
    client = connections.patient_client(replica.url, 1, 1.0)
    with pytest.raises(redis.ConnectionError, match="read-only replica"):  # a worker hands the step back
        client.set("never", "written")
