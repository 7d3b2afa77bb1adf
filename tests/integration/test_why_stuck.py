"""What a wait says of a job that runs: nothing. ``why_stuck`` only reads: it sends
no message, and does not take a worker that still beats but is too busy to answer
a broadcast for gone, nor the queues it reads for unread."""

from __future__ import annotations

import os
import signal

from covey.client import Client
from covey.config.settings import Settings
from tests.broker_queues import queue_length
from tests.integration.conftest import start_worker, stop_worker, wait_for_worker
from tests.integration.test_partition import wait_until
from tests.redis_server import RedisServer

SECONDS = 60


def test_a_worker_that_beats_but_answers_no_broadcast_is_not_reported_gone():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        # Beats every 5 s, fresh for 15: the pause below is one a busy worker's would be.
        worker = start_worker(server.url, COVEY_WORKER_HEARTBEAT_SECONDS="30")
        try:
            wait_for_worker(client, worker)
            handle = client.submit("[sim:latency 4000] What is 6 * 7?")
            wait_until(lambda: [n.status for n in handle.tree()] == ["running"], "the root running", SECONDS)
            os.kill(worker.pid, signal.SIGSTOP)  # it answers nothing now, as a worker starved of its CPU
            try:
                assert client.app.control.inspect(timeout=0.5).active() is None  # no worker answers the broadcast
                assert handle.why_stuck() is None
                assert client.queue_has_worker()  # its queue is read: its catalog entry names it
            finally:
                os.kill(worker.pid, signal.SIGCONT)
            assert handle.result(timeout=SECONDS).output == "42"
            assert handle.why_stuck() is None
            assert queue_length(client.redis, "covey") == 0  # it sent nothing
        finally:
            stop_worker(worker)
            client.close()
