"""A client's keys live as long as its own Settings say, not the environment's."""

from __future__ import annotations

from covey import keys
from covey.client import Client
from covey.config.settings import Settings

TTL = 60  # the shortest COVEY_JOB_TTL allowed, far from the default week


def test_submit_and_cancel_write_keys_with_the_clients_job_ttl(redis_server):
    client = Client(Settings(redis_url=redis_server.url, job_ttl=TTL))
    try:
        handle = client.submit("What is 2 + 2?")  # no worker: the job stays queued
        handle.cancel()
        for key in (keys.submitted(handle.id), keys.cancel(handle.id)):
            assert 0 < client.redis.ttl(key) <= TTL
    finally:
        client.close()
