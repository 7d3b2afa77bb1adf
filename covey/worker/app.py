"""The Celery app. ``create_app`` also serves the client, which only sends by name."""

from __future__ import annotations

from celery import Celery

from covey.config.celery import celery_config
from covey.config.settings import Settings, get_settings


def create_app(settings: Settings, include_tasks: bool = False) -> Celery:
    app = Celery("covey", include=["covey.worker.tasks"] if include_tasks else [])
    app.conf.update(celery_config(settings))
    return app


app = create_app(get_settings(), include_tasks=True)
