"""Riding out a store outage while waiting on a job.

A wait on a job (``JobHandle.result``, ``watch``, ``covey result``, ``covey run``)
outlives a Redis restart as a worker does: a store it cannot reach is tried
again every ``RETRY_SECONDS`` for up to ``COVEY_REDIS_OUTAGE_SECONDS``, and the
waiter is told once that it waits. One-shot commands (``covey status``, ``tree``,
``submit``, and the check every command makes that Redis answers before it starts)
still report at once: a wrong URL is said in a second, not after the allowance.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from covey.client.errors import StoreUnavailable

RETRY_SECONDS = 0.5  # between two tries of a store that is away

T = TypeVar("T")
Waiting = Callable[[str], None]  # told, in one line, that the wait goes on without its store

log = logging.getLogger(__name__)


class Outage:
    """One wait's allowance: ``seconds`` of a store away, counted from when it went."""

    def __init__(self, seconds: float, waiting: Waiting | None = None) -> None:
        self.seconds, self.waiting = seconds, waiting or log.warning
        self._since: float | None = None

    def ride(
        self, attempt: Callable[[], T], deadline: float | None = None, again: Callable[[], None] | None = None
    ) -> T:
        """``attempt()``, again while its store is away, until the allowance or
        ``deadline`` (``time.monotonic``) runs out; then its ``StoreUnavailable``.
        ``again`` runs before each retry (to reconnect what the outage broke)."""
        retrying = False
        while True:
            try:
                if retrying and again is not None:
                    again()
                value = attempt()
            except StoreUnavailable as e:
                now = time.monotonic()
                if self._since is None:
                    self._since = now
                    self.waiting(f"waiting up to {self.seconds:g}s for {e.store} to come back: {e}")
                if now - self._since >= self.seconds or (deadline is not None and now >= deadline):
                    raise
                time.sleep(RETRY_SECONDS)
                continue
            self._since = None
            return value
