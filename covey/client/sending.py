"""Publishing a job's message without subscribing to its result.

Celery's ``send_task`` subscribes to every task's result before it publishes
(``RedisBackend.on_task_call``), and the ``AsyncResult`` it returns unsubscribes
once collected: two round trips on the result store's pub/sub connection per job,
which a caller reading results in bulk (a sweep of thousands of jobs) never uses.
``ignore_result`` would skip them, but it also travels in the message and stops
the worker storing the result. So this builds and sends the message with the two
calls ``send_task`` makes for it, ``create_task_message`` and ``send_task_message``
(which route it, retry the publish and fire Celery's publish signals), and the
same arguments: the message is the one ``send_task`` sends from outside a task.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from kombu import Producer


def publish(app: Celery, producer: Producer, name: str, task_id: str, kwargs: dict[str, Any], **options: Any) -> None:
    """Send task ``name`` under ``task_id`` with ``kwargs`` and ``options`` (routing,
    ``argsrepr``/``kwargsrepr``), as ``send_task`` would, without a result subscription."""
    amqp = app.amqp
    options = amqp.router.route(options, name, (), kwargs)
    message = amqp.create_task_message(
        task_id,
        name,
        (),
        kwargs,
        reply_to=app.thread_oid,
        create_sent_event=app.conf.task_send_sent_event,
        ignore_result=None,  # send_task's own when none is given: the task's setting holds
        **options,
    )
    with producer.connection._reraise_as_library_errors():
        amqp.send_task_message(producer, name, message, **options)
