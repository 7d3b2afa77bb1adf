"""Flower as ``covey flower`` runs it: never open to a network without a password,
``/metrics`` behind the same password, a task list that shows each task's
job, agent and outcome without opening it, and on each task's page a link to its
job's page in ``covey ui``.

Flower 2.x checks basic auth on its pages and API but not on ``/metrics``, which
names every task type and worker; covey wraps that one handler in the same check.
"""

from __future__ import annotations

import ast
import html
import re
from typing import Any

from covey import wire
from covey.context import ROOT_AGENT_ID

# What the tasks page shows, in order: the result opens with the AgentResult's status, so
# outcomes differ at a glance beside Celery's state (SUCCESS for every agent that reported);
# kwargs carry the agent, role, depth, first words of the task and the job (covey.wire).
TASK_COLUMNS = "name,state,result,kwargs,uuid,received,runtime,worker"


def argv(port: int, address: str, basic_auth: str | None) -> list[str]:
    """Celery's command line for Flower on covey's app."""
    args = ["flower", f"--port={port}", f"--address={address}", f"--tasks-columns={TASK_COLUMNS}"]
    if basic_auth:
        args.append(f"--basic-auth={basic_auth}")
    return args


def shown(task):
    """Flower's ``format_task``, for its pages: each cell of the tasks list is cut at
    400 px, so a result reads ``status: output or error`` rather than the whole
    AgentResult (a failed task's, ``status (cause): error``, from its exception),
    and kwargs lead with the agent, role, depth and task words, the job id (which
    a leading ``job=<uuid>`` would fill the cell with) last. Search and the HTTP
    API see the task as sent."""
    result = getattr(task, "result", None)
    ended = _ended(getattr(task, "exception", None))
    if ended is not None:  # an agent that did not complete: the task failed saying how
        task.result = ended
    value = _result(result) if isinstance(result, str) else None
    if value is not None and "status" in value:
        detail = value.get("error") or value.get("output")
        task.result = f"{value['status']}: {detail}" if detail else str(value["status"])
    kwargs = getattr(task, "kwargs", None)
    if isinstance(kwargs, str) and kwargs.startswith("job="):
        job, _, rest = kwargs.partition(" ")
        if rest:
            task.kwargs = f"{rest} {job}"
    return task


# A result Celery cut at 1024 characters (a root's, with its children's summaries)
# still opens with its status, its output and its error: read those from the cut text.
_FIELD = re.compile(r"'(status|output|error)': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|None)")


def _result(text: str) -> dict[str, Any] | None:
    """The fields of a task's result as Celery's event shows it, cut or whole."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if not text.startswith("{'status': "):
            return None
        own = text.split("'children': ", 1)[0]  # the result's own fields come before its children's
        found: dict[str, Any] = {}
        for key, literal in _FIELD.findall(own):
            if literal != "None":
                found.setdefault(key, ast.literal_eval(literal))
        return found
    return value if isinstance(value, dict) else None


def _ended(exception: Any) -> str | None:
    """``failed (model_error): ...`` of a task's ``AgentEnded('...')``, as Celery's event shows it."""
    if not isinstance(exception, str) or not exception.startswith("AgentEnded(") or not exception.endswith(")"):
        return None
    try:
        said = ast.literal_eval(exception[len("AgentEnded(") : -1])
    except (ValueError, SyntaxError):
        return None
    return said if isinstance(said, str) else None


def _named_as_sent(event: dict[str, Any]) -> dict[str, Any]:
    """A root's resume or proceed runs under the job's id: Flower keeps the row's name
    ``covey.run_job``, the task that was sent, rather than the last step's."""
    if event.get("type") != "task-received" or event.get("name") not in (wire.RESUME, wire.PROCEED):
        return event
    labels = dict(re.findall(r"(job|agent)=(\S+)", str(event.get("kwargs", ""))))
    if labels.get("agent") == ROOT_AGENT_ID and labels.get("job") == event.get("uuid"):
        return {**event, "name": wire.RUN_JOB}
    return event


def _keep_root_names() -> None:
    from flower.events import EventsState

    if not getattr(EventsState.event, "covey_named", False):
        received = EventsState.event

        def event(self, event):
            return received(self, _named_as_sent(event))

        event.covey_named = True  # type: ignore[attr-defined]
        EventsState.event = event


def configure(ui: str | None) -> None:
    """Settings no command-line flag can carry: run before Flower starts. ``ui``:
    where ``covey ui`` serves, for the link on each task's page (None: no link)."""
    from flower.options import options

    options.format_task = shown
    _keep_root_names()
    _protect_metrics()
    if ui:
        _link_jobs(ui)


# The row of Flower's task page that shows a task's kwargs: the job's link goes before it.
_KWARGS_ROW = re.compile(rb'<div class="detail-row[^"]*">\s*<dt>Keyword arguments</dt>')
_JOB = re.compile(rb"\bjob=([0-9A-Za-z][0-9A-Za-z_.:-]{0,127})")


def linked(page: bytes, ui: str) -> bytes:
    """Flower's page of a task, with a row linking to the page of the job its kwargs
    name (``job=...``, covey.wire) in covey ui; a page without either, as it was."""
    job, row = _JOB.search(page), _KWARGS_ROW.search(page)
    if job is None or row is None:
        return page
    job_id = job.group(1).decode()
    href = html.escape(f"{ui.rstrip('/')}/jobs/{job_id}")
    link = (
        f'<div class="detail-row"><dt>Job in covey ui</dt><dd><a class="covey-job" href="{href}">'
        f"{html.escape(job_id)}</a></dd></div>\n      "
    ).encode()
    return page[: row.start()] + link + page[row.start() :]


def _link_jobs(ui: str) -> None:
    """Every task page Flower serves goes through ``linked`` (a Tornado output
    transform: Flower's own templates and handlers stay as they ship)."""
    from flower.app import Flower
    from tornado.web import OutputTransform

    class JobLink(OutputTransform):
        def __init__(self, request) -> None:
            self._task_page = "/task/" in request.path

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            if self._task_page and finishing and status_code == 200:
                chunk = linked(chunk, ui)
                headers["Content-Length"] = str(len(chunk))
            return status_code, headers, chunk

    created = Flower.__init__

    def init(self, *args, **kwargs):
        created(self, *args, **kwargs)
        self.add_transform(JobLink)

    Flower.__init__ = init


def _protect_metrics() -> None:
    """Make ``/metrics`` ask for the password the rest of Flower asks for (none
    when Flower runs without auth, as Flower's other pages)."""
    from flower.views.monitor import Metrics
    from tornado.web import authenticated

    if not getattr(Metrics.get, "covey_protected", False):
        Metrics.get = authenticated(Metrics.get)
        Metrics.get.covey_protected = True
