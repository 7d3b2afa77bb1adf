"""A delivery a worker holds without running it (a step sent with a countdown, as
an agent waiting on a cap or a window is) goes on in seconds after a Redis
restart, not after the visibility timeout.

When the broker connection drops, kombu gives the worker's unacknowledged
deliveries back and Celery forgets the ones it had not started; with Redis away,
the give-back fails, and the records stay in Redis under a live worker, whose
heartbeat keeps every other worker off them.
"""

from __future__ import annotations

import pytest
import redis

from covey import wire
from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_covey_worker, stop_worker, wait_for_worker
from tests.integration.test_partition import wait_until
from tests.integration.test_takeover import held
from tests.redis_server import AofRedis

COUNTDOWN_SECONDS = 15  # the step's countdown: Redis is restarted while the worker waits it out
BACK_WITHIN_SECONDS = 60  # far under the default visibility timeout (minutes)
NOTICED_SECONDS = 30


@pytest.mark.slow
def test_a_counted_down_step_held_through_a_redis_restart_runs_in_seconds():
    with AofRedis() as server:
        settings = Settings(redis_url=server.url)
        assert settings.redelivery_seconds > 2 * BACK_WITHIN_SECONDS
        client = Client(settings)
        broker = redis.Redis.from_url(server.url, decode_responses=True)
        # One process: no other worker process may take its deliveries over.
        worker = start_covey_worker(server.url, ["--processes", "1"])
        try:
            wait_for_worker(client, worker)
            spec = client.spec("[sim:latency 100] held through a restart")
            sent = client.app.send_task(wire.RUN_JOB, kwargs={"spec": spec.wire()}, countdown=COUNTDOWN_SECONDS)
            holding = lambda: sent.id in {task for tags in held(broker).values() for task in tags.values()}  # noqa: E731
            wait_until(holding, "the worker to hold it", 30)
            server.halt()
            log = worker.log_path
            # Celery reconnects only after it gave the deliveries back and forgot them.
            wait_until(lambda: "Cannot connect to" in log.read_text(), "the worker to find Redis away", NOTICED_SECONDS)
            server.start()
            result = client.job(sent.id).result(timeout=BACK_WITHIN_SECONDS)
            assert result.ok, result.error
            assert worker.poll() is None, f"the worker exited with {worker.returncode}"
        finally:
            stop_worker(worker)
            broker.close()
            client.close()
