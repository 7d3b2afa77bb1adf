"""Operators watch covey in Flower: tasks named covey.*, readable JSON args, basic auth."""

from __future__ import annotations

import subprocess
import sys
import re
import time

import httpx2 as httpx
import pytest

from tests.integration.conftest import ROOT, stop_worker, worker_env
from tests.redis_server import free_port

AUTH = ("ops", "secret")


@pytest.fixture
def flower(redis_server, worker):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "covey", "flower", "--port", str(port), "--basic-auth", ":".join(AUTH)],
        env=worker_env(redis_server.url), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthcheck", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        stop_worker(proc)
        raise RuntimeError("flower did not start")
    # Flower learns of workers from their events: once it lists one, events flow.
    while not httpx.get(f"{url}/workers", params={"json": 1}, auth=AUTH, timeout=5).json()["data"]:
        if time.monotonic() > deadline + 30:
            stop_worker(proc)
            raise RuntimeError("flower saw no worker events")
        time.sleep(0.2)
    yield url
    stop_worker(proc)


def test_flower_shows_covey_tasks_with_readable_args_behind_auth(flower, client):
    assert httpx.get(f"{flower}/api/tasks", timeout=5).status_code == 401
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] watch me"))
    assert handle.result(timeout=60).ok
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = httpx.get(f"{flower}/api/tasks", params={"taskname": "covey.agent"}, auth=AUTH, timeout=5).json()
        mine = [t for t in tasks.values() if handle.id in str(t.get("kwargs"))]
        if len(mine) == 2 and all(t["state"] == "SUCCESS" for t in mine):
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"flower never showed both children of {handle.id}")
    # readable labels, not the whole context and spec
    assert all(re.fullmatch(rf"job={handle.id} agent=root-sub-[0-9a-f]{{8}} role=worker depth=1 task='.*'", t["kwargs"])
               for t in mine)
    root = httpx.get(f"{flower}/api/task/info/{handle.id}", auth=AUTH, timeout=5).json()
    assert root["name"] in ("covey.run_job", "covey.resume")
