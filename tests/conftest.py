from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
import redis

from tests.redis_server import RedisServer

# The tests configure covey themselves; a developer's COVEY_* or OPENAI_API_KEY
# must not leak into them (or into the workers and CLIs they start).
for _name in [n for n in os.environ if n.startswith("COVEY_") or n == "OPENAI_API_KEY"]:
    del os.environ[_name]
# Workers on this host keep their shared secret in the user's state directory: the
# tests' own, not the developer's (covey.worker.signing); removed when the run ends.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="covey-test-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests against a real model server run only when asked for: ``pytest -m real_model``."""
    if "real_model" in (config.option.markexpr or ""):
        return
    opt_in = pytest.mark.skip(reason="a real model server: opt in with pytest -m real_model")
    for item in items:
        if "real_model" in item.keywords:
            item.add_marker(opt_in)


@pytest.fixture(scope="session")
def redis_server():
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_client(redis_server):
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield client
    client.close()
