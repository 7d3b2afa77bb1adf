"""Celery configuration for long-running agent tasks, and the app built from it."""

from __future__ import annotations

import math
from typing import Any

from celery import Celery

from covey.config import backend, broker, connections, failover, priorities, sentinel
from covey.config.settings import Settings

# kombu's sweep for deliveries past their visibility timeout runs under a Redis lock
# that lives 5 minutes; a worker killed inside a sweep left it standing, and no
# worker restored anything until it expired. A sweep takes milliseconds, and two
# at once are safe (each restore is a transaction watching the unacked records).
RESTORE_LOCK_SECONDS = 10


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker,
        "broker_transport": broker.transport(settings.broker),
        "result_backend": backend.patient(settings.backend),
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
            "unacked_mutex_expire": RESTORE_LOCK_SECONDS,
            # A list per job priority (covey.config.priorities); kombu's default has four.
            "priority_steps": priorities.LEVELS,
            **_redis_link(),
            "max_connections": connections.pool_size(settings.worker_slots),  # kombu's Redis pool: acks, publishes
            **_sentinels(settings, settings.broker),
        },
        "result_backend_transport_options": _sentinels(settings, settings.backend),
        "broker_connection_retry_on_startup": True,
        **_outages_waited_out(settings),
        "result_expires": int(settings.job_ttl),
        # Events and extended results cost Redis memory and commands for every task;
        # COVEY_TASK_EVENTS turns them on (Flower turns on worker events itself).
        "result_extended": settings.task_events,
        "task_track_started": settings.task_events,
        "worker_send_task_events": settings.task_events,
        "task_send_sent_event": settings.task_events,
        "task_default_queue": settings.queue,
        # RabbitMQ orders a queue's messages by priority only if it was declared so.
        "task_queue_max_priority": priorities.MOST_URGENT,
    }


def _redis_link() -> dict[str, Any]:
    """Socket settings that notice a silent link (kombu's Redis transport; ignored by others)."""
    return {
        "socket_timeout": connections.BROKER_SOCKET_TIMEOUT_SECONDS,
        "socket_connect_timeout": connections.CONNECT_TIMEOUT_SECONDS,
        "socket_keepalive": True,
        "health_check_interval": connections.HEALTH_CHECK_SECONDS,
    }


def _sentinels(settings: Settings, url: str) -> dict[str, Any]:
    """kombu's and Celery's transport options for a ``sentinel://`` URL: the master's
    name, and timeouts for the sentinels (Celery's result store gives them none)."""
    if not sentinel.is_sentinel(url):
        return {}
    return {"master_name": settings.redis_master, "sentinel_kwargs": connections.sentinel_options()}


def _outages_waited_out(settings: Settings) -> dict[str, Any]:
    """A broker or result store that is briefly away costs a wait, bounded by
    ``COVEY_REDIS_OUTAGE_SECONDS``, not a lost result or a message never sent;
    every pool holds a connection per worker slot."""
    outage, pause = settings.redis_outage_seconds, connections.BACKOFF_CAP_SECONDS
    retries = math.ceil(outage / pause)
    pool = connections.pool_size(settings.worker_slots)
    return {
        "covey_redis_outage_seconds": outage,  # read by covey.config.backend
        "task_publish_retry_policy": {
            "max_retries": retries,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": pause,
        },
        "result_backend_always_retry": True,
        "result_backend_max_retries": retries,
        "result_backend_max_sleep_between_retries_ms": int(pause * 1000),
        "redis_socket_timeout": connections.SOCKET_TIMEOUT_SECONDS,
        "redis_socket_connect_timeout": connections.CONNECT_TIMEOUT_SECONDS,
        "redis_socket_keepalive": True,
        "redis_backend_health_check_interval": connections.HEALTH_CHECK_SECONDS,
        "redis_max_connections": pool,
        "broker_pool_limit": pool,
    }


def create_app(settings: Settings, include_tasks: bool = False) -> Celery:
    """The worker includes covey's tasks; a client only sends them by name.

    A worker process shares one result store among its slots: Celery otherwise
    keeps one per thread, and a greenlet is a thread to it, so a gevent worker
    built a store, its pool and a new connection for every task it ran. The
    worker only writes and reads keys there, which one pool serves to every slot;
    a client keeps one per thread, since waiting on a result subscribes on it.
    """
    app = Celery(
        "covey",
        include=["covey.worker.tasks"] if include_tasks else [],
        amqp=f"{failover.__name__}:{failover.AMQP.__name__}",
    )
    app.conf.update(celery_config(settings), result_backend_thread_safe=include_tasks)
    return app
