"""Approvals no one decided by their deadline count as denied ("expired").

Every worker runs a thread that looks every ``LOOK_SECONDS`` for undecided
approvals past their deadline (``keys.approvals_due``); a Redis lock lets one of
them look at a time. Each expiry is recorded as a decision would be (once: a
person's decision that came first stands) and the agent waiting on it is sent
its next step, which tells the model no one approved the call in time, or ends
the agent when its own deadline is what passed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.signals import worker_ready

from covey import keys
from covey.config import connections
from covey.config.settings import Settings, get_settings
from covey.store.approvals import Approvals, UnknownApproval
from covey.store.outbox import Message
from covey.worker.takeover import keep_lease

log = logging.getLogger(__name__)

LOOK_SECONDS = 2.0
BATCH = 100  # approvals expired per look: a backlog drains over the next looks
LOCK_SECONDS = 30


def expire_due(approvals: Approvals, send: Callable[[Message], None], now: datetime) -> int:
    """Expire every approval due by ``now``; how many were expired by this call."""
    expired = 0
    for job_id, call_id in approvals.due(now.timestamp(), BATCH):
        try:
            decided = approvals.decide(job_id, call_id, "expired", None, now)
        except UnknownApproval:  # its job's records are gone: so is the agent that waited
            approvals.forget(job_id, call_id)
            continue
        expired += decided.recorded
        if decided.message is not None:
            log.info("job %s: approval %s expired undecided; its agent goes on", job_id, call_id)
            send(Message.loads(decided.message))
    return expired


def _loop(settings: Settings, app: Celery) -> None:
    store = connections.client(settings.redis_url, settings.redis_master, decode_responses=True)
    approvals = Approvals(store, settings.job_ttl)
    token, lock = uuid.uuid4().hex, keys.approvals_lock()
    while True:
        time.sleep(LOOK_SECONDS)
        try:
            if keep_lease(store, lock, token, LOCK_SECONDS):
                expire_due(approvals, lambda m: m.send(app), datetime.now(UTC))
        except Exception:  # Redis away, a malformed entry: look again next time, say why now
            log.exception("approval deadlines: this look failed")


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    """A thread per worker: its own connection, made in the process that runs it."""
    threading.Thread(target=_loop, args=(get_settings(), sender.app), name="covey-approvals", daemon=True).start()
