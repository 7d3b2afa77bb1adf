"""The worker's Celery app, configured from ``COVEY_*`` settings."""

from __future__ import annotations

from covey.config import faults
from covey.config.celery import create_app
from covey.config.settings import get_settings
from covey.worker.logs import install

install(get_settings().log_format)
faults.arm(get_settings().fault)
app = create_app(get_settings(), include_tasks=True)
