"""A Sentinel-managed Redis whose master is SIGKILLed mid-tree is, to ``covey
worker`` as deployed (the Sentinel URL and master name, every other setting at
its default), an outage that ends: the job completes, charged exactly as a clean
run, and nothing the ledger acknowledged is lost with the old master.

    PYTHONPATH=$PWD python bench/trials.py 10 tests/integration/test_sentinel.py
"""

from __future__ import annotations

import pytest
from redis.sentinel import Sentinel

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import start_covey_worker, stop_worker, wait_for_worker
from tests.integration.midtree import outlives
from tests.integration.test_partition import per_agent, wait_until
from tests.integration.test_takeover import JOB_SECONDS, TASK, assert_as_clean, kill_mid_tree
from tests.sentinels import MASTER, SentinelRedis

BACK_WITHIN_SECONDS = 120  # COVEY_REDIS_OUTAGE_SECONDS: what a failover may cost a step
FAILOVERS = 5  # in a row: kombu's own transport, once a switch had put it back, killed a worker by the third


def test_a_tree_outlives_its_master_being_killed_under_sentinel():
    with SentinelRedis() as topology:
        settings = Settings(redis_url=topology.url, redis_master=MASTER)
        log = outlives(settings, topology.fail_over, BACK_WITHIN_SECONDS, COVEY_REDIS_MASTER=MASTER)
        assert "confirmed by 0 of 1 replica(s)" in log, "no ledger write met the master alone"


@pytest.mark.slow
def test_workers_keep_covey_s_transport_through_failovers_in_a_row_and_take_over_a_killed_one():
    """Five master kills in a row, each mid-tree, on two workers at their defaults,
    then one worker SIGKILLed mid-tree: every job completes charged as a clean run,
    and the dead worker's deliveries go on (their holders were recorded on the
    masters the sentinels promoted, by covey's transport)."""
    with SentinelRedis() as topology:
        settings = Settings(redis_url=topology.url, redis_master=MASTER)
        client = Client(settings)
        sentinels = Sentinel([("127.0.0.1", s.port) for s in topology.sentinels], socket_timeout=5)
        broker = sentinels.master_for(MASTER, socket_timeout=5, decode_responses=True)
        workers = [start_covey_worker(topology.url, [], COVEY_REDIS_MASTER=MASTER) for _ in range(2)]
        try:
            for worker in workers:
                wait_for_worker(client, worker)
            clean = client.submit(client.spec(TASK))
            clean_result = clean.result(timeout=JOB_SECONDS)
            clean_agents = per_agent(client, clean.id)
            for _ in range(FAILOVERS):
                handle = client.submit(client.spec(TASK))
                wait_until(lambda h=handle: sum(n.final for n in h.tree()) >= 2, "two agents finished", JOB_SECONDS)
                topology.fail_over()
                assert_as_clean(client, handle, handle.result(timeout=BACK_WITHIN_SECONDS), clean_result, clean_agents)
                assert [w.poll() for w in workers] == [None, None], "a worker exited at a failover"
            handle, seconds, victim = kill_mid_tree(client, broker, workers)
            assert seconds is not None, "the worker died holding no task"
            print(f"takeover seconds: {seconds:.2f}")  # read by bench/trials.py --figure
            assert_as_clean(client, handle, handle.result(timeout=JOB_SECONDS), clean_result, clean_agents)
        finally:
            for worker in workers:
                stop_worker(worker)
            broker.close()
            client.close()
    for worker in workers:
        log = worker.log_path.read_text()
        assert ":**@" not in log, "a connection fell back to kombu's transport (named with a fake password)"
        assert "Unrecoverable error" not in log, log[-3000:]
