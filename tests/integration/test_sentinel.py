"""A Sentinel-managed Redis whose master is SIGKILLed mid-tree is, to ``covey
worker`` as deployed (the Sentinel URL and master name, every other setting at
its default), an outage that ends: the job completes, charged exactly as a clean
run, and nothing the ledger acknowledged is lost with the old master.

    PYTHONPATH=$PWD python bench/trials.py 10 tests/integration/test_sentinel.py
"""

from __future__ import annotations

from covey.config.settings import Settings
from tests.integration.midtree import outlives
from tests.sentinels import MASTER, SentinelRedis

BACK_WITHIN_SECONDS = 120  # COVEY_REDIS_OUTAGE_SECONDS: what a failover may cost a step


def test_a_tree_outlives_its_master_being_killed_under_sentinel():
    with SentinelRedis() as topology:
        settings = Settings(redis_url=topology.url, redis_master=MASTER)
        log = outlives(settings, topology.fail_over, BACK_WITHIN_SECONDS, COVEY_REDIS_MASTER=MASTER)
        assert "confirmed by 0 of 1 replica(s)" in log, "no ledger write met the master alone"
