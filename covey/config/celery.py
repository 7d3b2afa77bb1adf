"""Celery configuration for long-running agent tasks, and the app built from it."""

from __future__ import annotations

from typing import Any

from celery import Celery

from covey.config.settings import Settings
from covey.keys import JOB_TTL_SECONDS


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker,
        "result_backend": settings.backend,
        # JSON only: a task's arguments are readable in Flower and never unpickled.
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        # An agent step is acknowledged only when done; a worker that dies mid-step
        # has its task redelivered, and the ledger's idempotent reservations keep
        # the replay from being charged twice.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # Redis redelivers an unacknowledged task after the visibility timeout; it
        # exceeds the longest task (a slice and one model call: Settings), so a
        # healthy task never runs twice and a dead worker's work resumes in minutes.
        # kombu looks for such tasks every interval x throttle seconds (100 s by
        # default); throttle 1 makes the interval the one knob.
        "broker_transport_options": {
            "visibility_timeout": int(settings.redelivery_seconds),
            "unacked_restore_interval": settings.redelivery_check_seconds,
            "unacked_restore_throttle": 1,
        },
        "broker_connection_retry_on_startup": True,
        "result_expires": JOB_TTL_SECONDS,
        "result_extended": True,
        "task_track_started": True,
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "task_default_queue": settings.queue,
    }


def create_app(settings: Settings, include_tasks: bool = False) -> Celery:
    """The worker includes covey's tasks; a client only sends them by name."""
    app = Celery("covey", include=["covey.worker.tasks"] if include_tasks else [])
    app.conf.update(celery_config(settings))
    return app
