"""Broker entries no worker can read: dropped with one log line, never a dead worker.

kombu's Redis transport parses every entry it pops from a queue, and an error
there (an entry that is not JSON, a JSON list, an envelope without kombu's
properties, a body that is not the base64 it claims) escaped its consumer:
Celery logged "Unrecoverable error" and stopped the worker. An entry restored on
shutdown then stopped every worker that popped it next. Anyone who can push to a
queue could stop a fleet that way.

``why`` says what is wrong with an entry, before kombu builds a message of it;
the transport (``covey.config.broker``) drops such an entry and sends
``unreadable``, whose receiver in the worker stores a ``failed`` result under the
entry's task id when it names one (``covey.worker.unreadable``).
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from celery.utils.dispatch import Signal

log = logging.getLogger(__name__)

ENCODINGS = (None, "base64")  # the body encodings kombu's Redis transport reads
PROPERTIES = ("delivery_tag", "delivery_info")
DELIVERY = ("exchange", "routing_key")

# Sent with the entry's task id and name (each None when it names none) and why it was dropped.
unreadable = Signal(name="covey_unreadable", providing_args={"task_id", "task", "why"})


def why(entry: Any) -> str | None:
    """What keeps kombu from making a message of ``entry`` (a queue entry as parsed
    from JSON), or None when it can."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an object"
    properties = entry.get("properties")
    if not isinstance(properties, dict):
        return "no 'properties' object"
    missing = [name for name in PROPERTIES if name not in properties]
    if missing:
        return f"its properties have no {missing[0]!r}"
    delivery = properties["delivery_info"]
    if not isinstance(delivery, dict) or any(name not in delivery for name in DELIVERY):
        return f"its delivery_info is not an object with {' and '.join(map(repr, DELIVERY))}"
    headers = entry.get("headers")
    if headers is not None and not isinstance(headers, dict):
        return "its headers are not an object"
    encoding, body = properties.get("body_encoding"), entry.get("body")
    if encoding not in ENCODINGS:
        return f"body encoding {encoding!r} is none kombu reads"
    if body is not None and not isinstance(body, str):
        return f"its body is a JSON {type(body).__name__}, not a string"
    if body and encoding == "base64":
        try:
            base64.b64decode(body)
        except (binascii.Error, ValueError) as e:
            return f"its body is not base64 ({e})"
    return None


def drop(entry: Any, queue: str, reason: str) -> None:
    """Log one line for a dropped entry (``queue``: where it was popped) and tell ``unreadable``'s receivers."""
    headers = entry.get("headers") if isinstance(entry, dict) else None
    task_id, task = (headers.get("id"), headers.get("task")) if isinstance(headers, dict) else (None, None)
    task_id, task = (v if isinstance(v, str) else None for v in (task_id, task))
    named = f" (task {task} {task_id})" if task_id else ""
    log.error("dropped an unreadable entry of %s%s: %s", queue, named, reason)
    unreadable.send(sender=None, task_id=task_id, task=task, why=reason)
