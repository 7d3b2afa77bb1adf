"""COVEY_JOB_TTL bounds how long Redis keeps a finished job: every key it left has a TTL within it."""

from __future__ import annotations

import pytest
import redis

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.redis_server import RedisServer

TTL = 300


@pytest.mark.slow
def test_every_key_a_finished_job_leaves_expires_within_covey_job_ttl():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url, job_ttl=TTL))
        worker = start_worker(server.url, concurrency=4, COVEY_JOB_TTL=str(TTL))
        try:
            wait_for_worker(client, worker)
            result = client.run(client.spec("[sim:spawn width=3 depth=2] retention"), timeout=120)
        finally:
            stop_worker(worker)
            client.close()
        assert result.ok, result.error
        r = redis.Redis.from_url(server.url, decode_responses=True)
        fleet = ("_kombu", "unacked")  # the broker's own keys
        kept = {key: r.ttl(key) for key in r.scan_iter(count=1000) if not key.startswith(fleet)}
        assert any(result.job_id in key for key in kept), "the job left no records to read"
        assert {k: t for k, t in kept.items() if not 0 < t <= TTL} == {}, "kept past COVEY_JOB_TTL, or forever"
