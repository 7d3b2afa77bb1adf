"""``covey worker`` on every core: one Celery worker process per core, started and stopped together.

A Python process runs on one core, so a worker that keeps every core busy runs
a Celery worker per core, each with many thread or greenlet slots (as a WSGI
server runs workers x threads). This parent only starts them, hands a stop
signal on, and stops the rest when one exits, returning its exit code: restarting
a worker is its supervisor's job (systemd, compose), as for any Celery worker. A
child that exits unasked has failed, whatever its code, so the parent's code is
then never 0 and ``Restart=on-failure`` restarts it.
Each child is killed with the parent (``PR_SET_PDEATHSIG`` on Linux), so a killed
parent leaves no worker behind; its unacknowledged tasks go to another worker.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
EXIT_UNASKED = 1  # a child exited with 0 while no one asked the workers to stop
STOP_SECONDS = 60  # a warm shutdown lets running steps finish; past this, the children are killed


def child_name(hostname: str | None, index: int) -> str:
    """Each child's Celery node name, distinct on one host: ``name-2@host``."""
    name, _, host = (hostname or "covey@%h").partition("@")
    return f"{name}-{index}@{host or '%h'}"


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: a killed parent leaves its children running
        pass


def run(argv_for: Callable[[int], list[str]], processes: int, env: dict[str, str]) -> int:
    """Start ``processes`` children (``argv_for(i)``, i from 1), pass stop signals on,
    and return the first exit code once every child has exited."""
    # Each child in its own session: a terminal's Ctrl-C reaches only this parent, which
    # hands it on once (a second SIGINT would turn Celery's warm shutdown cold).
    children = [
        subprocess.Popen(argv_for(i), env=env, preexec_fn=_die_with_parent, start_new_session=True)
        for i in range(1, processes + 1)
    ]
    stopping = []

    def stop(signum: int, _frame) -> None:
        stopping.append(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    pid, status = os.wait()  # the first child to exit (its Popen then reads it as gone)
    first = os.waitstatus_to_exitcode(status)
    asked = bool(stopping)
    if not asked:
        log.warning("worker process %s exited (%s): stopping the others", pid, first)
        stop(signal.SIGTERM, None)
    for child in children:
        try:
            child.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    code = first if first >= 0 else 128 - first
    return code or (0 if asked else EXIT_UNASKED)


def argv(pool: str, slots: int, loglevel: str, queues: list[str], hostname: str) -> list[str]:
    """The command line of one child: ``covey worker`` as a single process."""
    return [
        sys.executable,
        "-m",
        "covey",
        "worker",
        "--processes",
        "1",
        "--pool",
        pool,
        "--concurrency",
        str(slots),
        "--loglevel",
        loglevel,
        "--queues",
        ",".join(queues),
        "--hostname",
        hostname,
    ]
