"""The ledger tests get a redis-server of their own, emptied before each test:
``release_stale`` sweeps every job's reservations, so no other test's may be there."""

from __future__ import annotations

import pytest

from tests.redis_server import RedisServer


@pytest.fixture(scope="package")
def redis_server():
    with RedisServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _empty(redis_client):
    redis_client.flushdb()  # this package's own server
