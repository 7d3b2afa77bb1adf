"""Sending again the expected messages that reached no queue.

The outbox (``covey.store.outbox``) records every message a step sends before it
is sent, and a covey client's ``run_job`` before it sends a job. One that is in
no broker queue and no unacknowledged set was lost: its sender died between
recording and sending it, or the broker lost it at a pop
(kombu's Redis transport pops with ``BRPOP`` and records the delivery as
unacknowledged only afterwards). Tasks are acknowledged late, so a message a
live worker holds or runs is in the unacknowledged set; and a dead worker's
deliveries stay there until the broker restores them. So a message missing from
both is in no worker either, and sending it again loses nothing: the step it
starts checks it is expected, and replays what the ledger settled.

A message is sent again only when two looks, ``COVEY_RECONCILE_SECONDS`` apart,
found the same expected message missing: one just recorded and on its way to the
broker is not sent twice. A message is looked for on the queue it names (its
job's queue, which need not be the looking worker's), and sent again there.
Every worker runs a reconciler thread; a Redis lock lets one of them look at a
time. A lost message waits at most about three intervals, plus however long the
broker took to restore a dead worker's ones.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready

from covey import keys
from covey.config import connections
from covey.config.deliveries import in_broker
from covey.config.settings import Settings, get_settings
from covey.store.outbox import Message, Outbox, queues_of
from covey.worker.takeover import keep_lease

log = logging.getLogger(__name__)


class Reconciler:
    """Looks for lost messages of the jobs whose outbox holds some, and sends them again."""

    def __init__(self, store: redis.Redis, broker: redis.Redis, queues: Iterable[str], send: Callable[[Message], None]):
        self._store, self._broker, self._queues, self._send = store, broker, list(queues), send
        self._outbox = Outbox(store)
        self._missing: dict[tuple[str, str], Message] = {}  # seen missing at the last look

    def look(self, job_ids: Iterable[str] | None = None) -> list[Message]:
        """One look: remember what is missing, send again what was missing last time too.
        Returns the messages sent again."""
        jobs = self._outbox.jobs() if job_ids is None else list(job_ids)
        expected = {(job, agent): m for job, ms in self._outbox.messages_of(jobs).items() for agent, m in ms.items()}
        if not expected:
            self._missing = {}
            return []
        seen = in_broker(self._broker, queues_of(expected.values(), self._queues))
        missing = {k: m for k, m in expected.items() if not any(m.seen_as(c.headers) for c in seen.get(m.task_id, ()))}
        lost = [m for k, m in missing.items() if self._missing.get(k) == m]
        self._missing = missing
        for message in lost:
            log.warning("expected %s message %s is in no queue: sent again", message.name, message.task_id)
            self._send(message)
        return lost


def _loop(settings: Settings, app: Celery) -> None:
    store = connections.client(settings.redis_url, settings.redis_master, decode_responses=True)
    broker = connections.client(settings.broker, settings.redis_master, decode_responses=True)
    reconciler = Reconciler(store, broker, [settings.queue], lambda m: m.send(app))
    token, lock = uuid.uuid4().hex, keys.reconciler_lock()
    while True:
        time.sleep(settings.reconcile_seconds)
        try:
            if keep_lease(store, lock, token, keys.RECONCILE_LOCK_SECONDS):
                reconciler.look()
        except Exception:  # Redis away, a malformed entry: look again next time, say why now
            log.exception("reconciler: this look failed")


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    """A thread per worker: its own connections, made in the process that runs it."""
    settings = get_settings()
    if not settings.redis_broker:
        return  # another broker acknowledges its deliveries: nothing is lost at a pop
    app = sender.app
    threading.Thread(target=_loop, args=(settings, app), name="covey-reconciler", daemon=True).start()
