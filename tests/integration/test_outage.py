"""Redis restarted mid-tree (with its append-only file) is waited out by ``covey
worker`` as deployed, every flag at its default: the worker lives on, and the job
completes soon after Redis returns, charged exactly as a clean run."""

from __future__ import annotations

import time

import pytest

from covey.config.settings import Settings
from tests.integration.midtree import outlives
from tests.redis_server import AofRedis

BACK_WITHIN_SECONDS = 60  # the bound: a minute
DOWN_SECONDS = 5


@pytest.mark.slow
def test_a_tree_outlives_a_redis_restart_with_default_settings():
    with AofRedis() as server:

        def restart() -> None:
            server.halt()
            time.sleep(DOWN_SECONDS)
            server.start()

        outlives(Settings(redis_url=server.url), restart, BACK_WITHIN_SECONDS)
