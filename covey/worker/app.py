"""The worker's Celery app, configured from ``COVEY_*`` settings."""

from __future__ import annotations

from covey.config import faults
from covey.config.celery import create_app
from covey.config.settings import get_settings
from covey.tools import registry
from covey.worker import approval_deadlines, reconciler, takeover  # noqa: F401  (their threads start at worker_ready)
from covey.worker.logs import install

install(get_settings().log_format)
faults.arm(get_settings().fault)
try:  # the tools this worker serves, before any task runs: a tool that cannot load stops it
    registry.load(get_settings().tools, get_settings().tool_timeouts, get_settings().mcp)
except registry.ToolsError as e:
    raise SystemExit(f"covey worker: {e}") from None
app = create_app(get_settings(), include_tasks=True)
# Drops a message whose body cannot be decoded with one line, and ends its job (covey.worker.unreadable).
app.conf.worker_consumer = "covey.worker.unreadable:Consumer"
