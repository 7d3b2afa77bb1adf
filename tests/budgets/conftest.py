"""The ledger tests get a redis-server of their own, emptied before each test:
``release_stale`` sweeps every job's reservations, so no other test's may be there."""

from __future__ import annotations

import pytest
import redis

from tests.redis_server import RedisServer


@pytest.fixture(scope="package")
def redis_server():
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()  # this package's own server
    yield client
    client.close()
