"""The worker's Celery app, configured from ``COVEY_*`` settings."""

from __future__ import annotations

from covey.config import faults
from covey.config.celery import create_app
from covey.config.settings import get_settings
from covey.tools import registry
from covey.worker.logs import install

install(get_settings().log_format)
faults.arm(get_settings().fault)
try:  # the tools this worker serves, before any task runs: a tool that cannot load stops it
    registry.load(get_settings().tools, get_settings().tool_timeouts, get_settings().mcp)
except registry.ToolsError as e:
    raise SystemExit(f"covey worker: {e}") from None
app = create_app(get_settings(), include_tasks=True)
# Celery formats every result's repr for its "succeeded" log line and task event,
# whether either goes anywhere (80 µs a job at its 1,024 characters): whole where
# task events let Flower show it, else enough for the status and the job id.
app.Task.resultrepr_maxsize = 1024 if get_settings().task_events else 100
