"""A job whose message no worker could read ends ``failed`` naming why, instead of waiting forever.

The broker's transport drops an entry kombu cannot make a message of
(``covey.config.unreadable``), and Celery drops a message whose body it cannot
decode (a body nested past the JSON reader's depth, say); either used to leave a
``covey.run_job`` PENDING for good, since nothing was ever stored under its id.
Here such a job's result is stored as refused (``InvalidSpec``, as for any spec
that cannot run), but only where the id names no job covey holds records of and
no result is stored: an unreadable copy of a real job's message (a forgery, a
corrupted duplicate) must not end the real one. The other tasks' messages are
recorded in their job's outbox, which sends a readable copy again.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import states
from celery.worker.consumer import Consumer as CeleryConsumer

from covey import keys, wire
from covey.config import unreadable
from covey.context import ROOT_AGENT_ID
from covey.spec import InvalidSpec
from covey.worker.app import app
from covey.worker.deps import worker_deps

log = logging.getLogger(__name__)


@unreadable.unreadable.connect
def refuse(sender: Any = None, task_id: str | None = None, task: str | None = None, why: str = "", **_: Any) -> None:
    """Store job ``task_id``'s result as refused, when it is a job's first message
    and nothing else holds its id."""
    if task != wire.RUN_JOB or not task_id:
        return
    try:
        store = worker_deps().redis
        if store.exists(keys.submitted(task_id), keys.agent(task_id, ROOT_AGENT_ID), keys.nodes(task_id)):
            log.warning("job %s: an unreadable copy of its message was dropped; the job is left as it is", task_id)
            return
        if app.backend.get_state(task_id) != states.PENDING:
            return
        error = InvalidSpec(f"invalid job spec: its message could not be read: {why}")
        app.backend.mark_as_failure(task_id, error)
    except Exception:  # Redis away: the line dropping the entry is said already
        log.exception("job %s: its refusal could not be stored", task_id)


class Consumer(CeleryConsumer):
    """Celery's consumer, dropping a message it cannot decode with one line (Celery's
    own logs a traceback) and ending its job as refused (``refuse``)."""

    def on_decode_error(self, message: Any, exc: Exception) -> None:
        message.ack()
        unreadable.drop(
            {"headers": message.headers}, f"queue {_queue(message)!r}", f"its body cannot be decoded: {exc}"
        )


def _queue(message: Any) -> str:
    return str((message.delivery_info or {}).get("routing_key", "?"))
