"""What every benchmark here starts: a private redis-server and worker subprocesses.

A benchmark measures the covey tree it is run from (``ROOT``): its workers get
``PYTHONPATH=ROOT``, so ``bench/all.py --before REV`` can run the same scripts in
a worktree of an older commit and compare.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/x.py` puts bench/, not the root, on the path

from tests.redis_server import RedisServer  # noqa: E402

__all__ = ["ROOT", "RedisServer", "Worker", "start_redis"]


def start_redis(server: RedisServer) -> None:
    """A private redis-server that ignores the terminal's Ctrl-C.

    Ctrl-C goes to the whole foreground process group; a redis-server that died
    with it would leave the workers retrying their connections instead of shutting
    down. A child inherits a blocked signal, and redis-server never unblocks it.
    """
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        server.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


class Worker:
    """A worker subprocess in its own session: Ctrl-C reaches only this script, which stops it."""

    def __init__(self, name: str, argv: list[str], redis_url: str, queue: str, logs: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
        env.update(COVEY_REDIS_URL=redis_url, COVEY_QUEUE=queue, COVEY_MODEL="sim", PYTHONPATH=str(ROOT))
        self.name, self.log = name, logs / f"{name}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_ready(self, app, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log.read_text()[-2000:]}")
            if app.control.ping(destination=[self.name], timeout=0.5):
                return
        raise RuntimeError(f"{self.name} did not answer a ping in {seconds}s")

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.terminate()  # a warm shutdown
        try:
            self.proc.wait(timeout=20)
        finally:  # timed out, or interrupted while waiting: it must not outlive Redis
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
