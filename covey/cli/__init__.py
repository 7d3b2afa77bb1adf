"""The ``covey`` command line."""

import os
import sys


def _gevent_first() -> None:
    """A gevent worker needs the standard library patched before anything imports
    it, as Celery's own command does: a socket, lock or ssl context made before the
    patch blocks every greenlet of the process at once."""
    args = sys.argv[1:]
    if "worker" not in args:
        return
    given = [
        a.partition("=")[2] or (args[i + 1] if i + 1 < len(args) else "")
        for i, a in enumerate(args)
        if a == "--pool" or a.startswith("--pool=")
    ]
    if (given[-1] if given else os.environ.get("COVEY_WORKER_POOL")) != "gevent":
        return
    try:
        from gevent import monkey
    except ImportError:  # `covey worker` says what to install
        return
    monkey.patch_all()


_gevent_first()

from covey.cli.app import cli, main  # noqa: E402

__all__ = ["cli", "main"]
