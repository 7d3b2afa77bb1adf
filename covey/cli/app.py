"""The ``covey`` command: the click group, shared helpers and one-line errors.

Commands live beside it: ``jobs`` (run, submit, follow and stop jobs),
``transcripts`` (what each agent said and did) and ``ops`` (worker, Flower, the
sim server, the demo, ledger scopes).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from typing import NoReturn

import click
import redis
from kombu.exceptions import OperationalError
from pydantic import ValidationError

from covey.config.settings import InvalidConfiguration, get_settings
from covey.errors import describe
from covey.inputs import Unreadable
from covey.spec import InvalidSpec


def connect():
    """A Client on this machine's settings, after a ping: an unreachable Redis is
    one clear line, not a backend traceback."""
    from covey.client import Client

    client = Client()
    client.ping()
    return client


def print_json(model) -> None:
    click.echo(json.dumps(model.model_dump(mode="json") if hasattr(model, "model_dump") else model, indent=2))


@click.group()
@click.version_option(package_name="covey", prog_name="covey")
def cli() -> None:
    """covey: trees of LLM agents as Celery tasks under a Redis budget ledger."""


def main() -> None:
    try:
        _run()
    except SystemExit as e:
        _exit(e.code)


def _run() -> None:
    from covey.client.errors import BROKER, REDIS, JobRefused, JobTimeout, StoreUnavailable
    from covey.models.catalog import ModelsFileError

    try:
        cli(standalone_mode=True)
    except JobTimeout as e:
        _fail(str(e), 3)
    except (InvalidSpec, JobRefused, Unreadable) as e:
        _fail(str(e), 2)
    except InvalidConfiguration as e:  # settings from COVEY_* variables
        _fail(str(e), 2)
    except ValidationError as e:  # settings a command built from its own flags
        _fail(f"invalid configuration: {describe(e)}", 2)
    except ModelsFileError as e:
        _fail(f"invalid models file {e}", 2)
    except StoreUnavailable as e:
        _fail(str(e), 2)
    # Commands that read a store outside the client (scope, sweep) have only the error's type to go by.
    except redis.ConnectionError as e:
        _fail(str(StoreUnavailable(REDIS, get_settings().redis_url, e)), 2)
    except OperationalError as e:
        _fail(str(StoreUnavailable(BROKER, get_settings().broker, e)), 2)
    except redis.ResponseError as e:
        if "DB index is out of range" not in str(e):
            raise
        why = "its URL names a database this Redis has not (16 by default, 0-15)"
        _fail(f"{StoreUnavailable(REDIS, get_settings().redis_url, e)}: {why}", 2)


def _exit(code: str | int | None) -> NoReturn:
    """End the command with ``code`` (``sys.exit``'s), once its exit handlers have
    run and its output is flushed, without the interpreter's teardown: freeing
    every module of celery, pydantic, openai and matplotlib one by one took
    0.15-0.25 s after a command had done its work. Where a thread of its own
    still runs, or the output cannot be flushed, it exits as Python does."""
    others = (t for t in threading.enumerate() if t is not threading.main_thread())
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()  # what the teardown would run first: logging's and telemetry's flushes
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: Python's own exit reports it (the handlers ran once)
        sys.exit(code)
    if code is None or isinstance(code, int):
        os._exit(code or 0)
    print(code, file=sys.stderr, flush=True)  # sys.exit("message") prints it and exits 1
    os._exit(1)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C


def interrupted(what_goes_on: str) -> NoReturn:
    """Ctrl-C stops this command, never the work it sent: say so and what to do."""
    click.echo(f"interrupted: {what_goes_on}", err=True)
    sys.exit(EXIT_INTERRUPTED)


def _fail(message: str, code: int) -> None:
    """One line, worded like click's own errors."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


# Each module registers its commands on `cli`.
from covey.cli import approvals, events, files, jobs, listing, models, ops, plans, sessions  # noqa: E402,F401,I001
from covey.cli import sweep, tenants, tools, transcripts, ui  # noqa: E402,F401
