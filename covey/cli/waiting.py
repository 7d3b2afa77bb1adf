"""Waiting on a job from the command line: bounded, and never in silence.

On a terminal a live line (rich, on standard error) shows the agents done,
running, waiting and queued and the spend against the caps; elsewhere, or with
``--json``, nothing is drawn and only the final result is printed. Either way,
a job that has not finished after a few seconds is looked at, and what keeps it
(no worker, the wrong queue, agents whose worker died, or, off a terminal, a
scope's running cap or window its agents wait for) is said once. A store that
goes away meanwhile is waited out up to ``COVEY_REDIS_OUTAGE_SECONDS``, saying so.
"""

from __future__ import annotations

import time

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from covey.cli import render
from covey.client.client import RESULT_FETCH_SECONDS, JobHandle
from covey.client.errors import JobTimeout, StoreUnavailable
from covey.client.progress import waiting
from covey.results import AgentResult

NO_WORKER_HINT_SECONDS = 3.0  # how long a job may sit still before we look for why


def wait(handle: JobHandle, timeout: float | None, live: bool) -> AgentResult:
    """The job's result within ``timeout`` seconds in all, or ``JobTimeout`` saying
    how long was really waited and why the job is stuck, when that is known."""
    return _live(handle, timeout) if live else _quiet(handle, timeout)


def _quiet(handle: JobHandle, timeout: float | None) -> AgentResult:
    started = time.monotonic()
    first = NO_WORKER_HINT_SECONDS if timeout is None else min(timeout, NO_WORKER_HINT_SECONDS)
    try:
        return handle.result(timeout=first, waiting=_warn)
    except JobTimeout as e:
        if timeout is not None and timeout <= first:
            raise
        _warn(e.reason)
        _say_waits(handle)
        reason = e.reason
    remaining = None if timeout is None else timeout - (time.monotonic() - started)
    if remaining is not None and remaining <= 0:
        raise JobTimeout(handle.id, time.monotonic() - started, reason)
    try:
        return handle.result(timeout=remaining, diagnose=False, waiting=_warn)
    except JobTimeout:
        waited = time.monotonic() - started
        raise JobTimeout(handle.id, waited, handle.why_stuck()) from None


def _live(handle: JobHandle, timeout: float | None) -> AgentResult:
    console = Console(stderr=True)
    hinted, waited = False, 0.0
    with Live(console=console, transient=True, refresh_per_second=4) as line:

        def say(reason: str | None) -> None:
            if reason:
                line.console.print(f"warning: {reason}", style="yellow", highlight=False)

        for progress in handle.watch(timeout=timeout, waiting=say):
            line.update(Text(progress.line()))
            waited = progress.elapsed
            if not hinted and waited >= NO_WORKER_HINT_SECONDS and not handle.done():
                hinted = True
                say(handle.why_stuck())
    if not handle.done():
        raise JobTimeout(handle.id, waited, handle.why_stuck())
    return handle.result(timeout=RESULT_FETCH_SECONDS, diagnose=False, waiting=_warn)


def _say_waits(handle: JobHandle) -> None:
    """What the job's agents wait for, when they wait for a scope: the live line's news,
    said once. Nothing, when the store is away: the wait that follows rides that out."""
    try:
        waits = handle.progress().waits
    except StoreUnavailable:
        return
    if waits:
        click.echo(waiting(waits), err=True)


def _warn(reason: str | None) -> None:
    if reason:
        click.echo(f"warning: {reason}", err=True)


def watch_tree(handle: JobHandle, live: bool) -> None:
    """Until the job ends: on a terminal, redraw its tree and progress line in
    place (the last frame stays); elsewhere, wait without drawing."""
    if not live:
        for _ in handle.watch():
            pass
        return
    with Live(console=Console(), auto_refresh=False) as screen:
        for progress in handle.watch():
            screen.update(Text(f"{render.tree(handle.tree())}\n\n{progress.line()}"), refresh=True)
