"""The ledger tests get a redis-server of their own, emptied before each test:
``release_stale`` sweeps every job's reservations, so no other test's may be there."""

from __future__ import annotations

import pytest

from covey import keys
from covey.budgets.redis_ledger import RedisLedger
from tests.redis_server import RedisServer


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="package")
def redis_server():
    with RedisServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _empty(redis_client):
    redis_client.flushdb()  # this package's own server


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def ledger(redis_client, clock):
    return RedisLedger(redis_client, keys.DEFAULT_JOB_TTL_SECONDS, clock=clock)
