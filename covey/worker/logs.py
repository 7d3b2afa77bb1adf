"""The worker's log lines: readable by default, one JSON object a line under
``COVEY_LOG_FORMAT=json`` for a log pipeline to index.

Each agent step and state change is one line (``agent_event``) with the fields an
operator filters on: job, agent, parent, depth, cycle, tokens, status. It carries
ids and counts only, never a prompt, a reply or a setting, so no secret reaches it.
Every other line (an error, a traceback, Celery's own) is redacted
(``covey.worker.redaction``), and Celery's line for a finished task names the task,
not what it returned: a root's return value is the job's whole answer.

Under JSON every line the worker writes is JSON: Celery's banner and shutdown
notices, which it prints around logging, and warnings, also those raised before
Celery sets its logging up.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from celery.app import trace
from celery.apps import worker as celery_worker
from celery.signals import after_setup_logger, after_setup_task_logger, celeryd_after_setup
from celery.utils.log import get_multiprocessing_logger as multiprocessing_logger

from covey.worker.redaction import Redacting

if TYPE_CHECKING:
    from covey.status import AgentStatus
    from covey.worker.agent_state import AgentState

events = logging.getLogger("covey.agents")


def agent_event(event: str, state: AgentState, status: AgentStatus) -> None:
    if not events.isEnabledFor(logging.INFO):  # a worker at --loglevel warning: three lines an agent built for none
        return
    ctx = state.ctx
    fields = {
        "job": ctx.job_id,
        "agent": ctx.agent_id,
        "parent": ctx.parent_id,
        "depth": ctx.depth,
        "cycle": state.cycle,
        "tokens": state.usage.total_tokens,
        "status": status.value,
    }
    events.info(
        "%s: job %s agent %s (parent %s, depth %s) cycle %s tokens %s status %s",
        event,
        *fields.values(),
        extra={"covey": {"event": event, **fields}},
    )


class JsonFormatter(logging.Formatter):
    """One JSON object per record: an agent event's fields, or the message."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
        }
        fields = getattr(record, "covey", None)
        line.update(fields) if fields else line.update(message=record.getMessage())
        if record.exc_info:
            line["exception"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _handlers(logger: logging.Logger | None) -> list[logging.Handler]:
    """The handlers Celery just set up: the task logger's, or the root's and the
    prefork pool's, which it sets up beside the root's."""
    root = logging.getLogger()
    loggers = [logger] if logger not in (None, root) else [root, multiprocessing_logger()]
    return [h for each in loggers if each is not None for h in each.handlers]


def _json_handlers(logger: logging.Logger | None = None, **_: Any) -> None:
    for handler in _handlers(logger):
        handler.setFormatter(JsonFormatter())


def emit(log_format: str) -> None:
    """Send what is logged before Celery sets its handlers up (an import's warning,
    the supervisor of several worker processes) to standard error in ``log_format``,
    and Python's warnings through logging, so they are formatted like the rest."""
    handler = logging.StreamHandler()
    handler.addFilter(Redacting())
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)


def announce(message: str, log_format: str) -> None:
    """One line of the worker command's own, written before Celery sets its logging
    up (and without setting any up): a JSON record under JSON, as every line is."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    handler.handle(logging.LogRecord("covey.worker", logging.INFO, __file__, 0, message, None, None))


# Celery writes its banner with print() and its shutdown notices with os.write,
# both to standard output and around logging; under JSON each becomes a record.
said = logging.getLogger("celery.apps.worker")


def _banner_as_json(instance: Any = None, **_: Any) -> None:
    """The banner's lines as one record, and Celery's own banner off (it reads
    ``quiet`` right after this signal)."""
    info = instance.startup_info(artlines=False) + (instance.extra_info() or "")
    said.info("worker starting", extra={"covey": {"event": "worker_starting", "banner": info.strip().splitlines()}})
    instance.quiet = True


def _say_as_json(msg: str, f: Any = None) -> None:
    said.warning(msg.strip())


def _redacting_handlers(logger: logging.Logger | None = None, **_: Any) -> None:
    for handler in _handlers(logger):
        handler.addFilter(Redacting())


# The HTTP client logs each request at INFO, which Celery's worker shows: a second
# line for every model call beside its agent event. Its warnings still show.
HTTP_CLIENT_LOGGERS = ("httpx", "httpx2")


# Celery's format for a task that succeeded, without its return value (celery.app.trace.LOG_SUCCESS).
LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"
# And for one that raised what it declares it may (an agent that did not complete, a
# refused spec), without the exception's text: covey's own line says what it needs to.
LOG_EXPECTED = trace.log_policy_t("Task %(name)s[%(id)s] ended: %(description)s", "raised expected", logging.INFO, 0, 0)


def install(log_format: str) -> None:
    """Make Celery's worker and task loggers redact what they write, and write JSON
    when asked to; leave the HTTP client's request lines and tasks' return values out."""
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    trace.LOG_SUCCESS = LOG_SUCCESS
    trace.log_policy_expected = LOG_EXPECTED
    after_setup_logger.connect(_redacting_handlers, weak=False)
    after_setup_task_logger.connect(_redacting_handlers, weak=False)
    if log_format == "json":
        emit(log_format)
        after_setup_logger.connect(_json_handlers, weak=False)
        after_setup_task_logger.connect(_json_handlers, weak=False)
        celeryd_after_setup.connect(_banner_as_json, weak=False)
        celery_worker.safe_say = _say_as_json
