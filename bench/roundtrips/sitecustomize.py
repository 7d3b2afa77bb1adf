"""Counts a worker's Redis round trips for ``bench/commands.py``: put on the worker's
PYTHONPATH, Python imports it at start. Each time a Redis connection sends what it
then waits on (one command, or a whole pipeline) counts one; the count goes to the
file ``COVEY_BENCH_ROUNDTRIPS`` names, every half second."""

from __future__ import annotations

import itertools
import os
import threading
import time

PATH = os.environ.get("COVEY_BENCH_ROUNDTRIPS")

if PATH:
    from redis.connection import AbstractConnection

    _sent = itertools.count(1)
    _last = [0]
    _send = AbstractConnection.send_packed_command

    def _counted(self, command, check_health=True):
        _last[0] = next(_sent)
        return _send(self, command, check_health)

    AbstractConnection.send_packed_command = _counted

    def _write() -> None:
        while True:
            time.sleep(0.5)
            with open(PATH, "w") as f:
                f.write(str(_last[0]))

    threading.Thread(target=_write, name="bench-roundtrips", daemon=True).start()
