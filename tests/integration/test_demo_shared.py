"""``covey demo`` on a Redis that already runs: it says which one it uses, runs in a
database of it that was empty, and leaves every database's keys as it found them."""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis

from tests.integration.conftest import ROOT, worker_env
from tests.redis_server import RedisServer

DATABASES = 16


def database(url: str, db: int) -> redis.Redis:
    return redis.Redis.from_url(url.rpartition("/")[0] + f"/{db}")


def every_key(url: str) -> dict[int, dict[bytes, int]]:
    """Per database, each key and its TTL."""
    found = {}
    for db in range(DATABASES):
        client = database(url, db)
        try:
            found[db] = {key: client.ttl(key) for key in client.scan_iter()}
        finally:
            client.close()
    return found


@pytest.mark.slow
def test_demo_on_a_running_redis_names_it_and_removes_every_key_it_wrote():
    with RedisServer() as server:
        for db, key in ((0, "deployment:job"), (1, "another:app")):  # database 1 is in use: not the demo's
            client = database(server.url, db)
            client.set(key, "kept")
            client.close()
        before = every_key(server.url)
        proc = subprocess.run(
            [sys.executable, "-m", "covey", "demo", "--width", "2", "--depth", "1"],
            env=worker_env(server.url),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[0] == (
            f"using the Redis at {server.url}, in its database 2, which is empty: emptied again when the demo ends"
        )
        assert "output   leaves=2" in proc.stdout
        assert every_key(server.url) == before
