"""The pages a person reads: the newest jobs, one job (its tree, ledger and waiting
approvals, kept live by the job's events in the browser), and one agent's
transcript. Each is drawn on the server from covey's records in Redis; a page
never shows what the records do not hold, and never a secret: no spec field but
those shown, no URL, no key.

Endpoints are plain functions: Starlette runs them in its thread pool, so a
Redis read never waits in the event loop."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import pass_context
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from covey.budgets.ledger import TOTALS, LedgerSnapshot
from covey.client import Client, JobHandle
from covey.client.errors import JobRefused
from covey.context import ROOT_AGENT_ID
from covey.errors import CoveyError
from covey.status import JobStatus
from covey.store.tree import Node
from covey.ui import views

LIMITS = (20, 50, 200)  # the jobs page's sizes
REFUSAL_SECONDS = 5  # a refused job's result is in: reading it takes one round trip
LISTED = {s.value for s in JobStatus if s is not JobStatus.UNKNOWN}

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
templates.env.filters.update(dollars=views.dollars, short=views.short, said=views.said, why=views.why)


@pass_context
def path_for(context: dict[str, Any], name: str, /, **params: Any) -> str:
    """A route's path, not its whole URL: the pages work behind a proxy that serves them under another host."""
    return str(context["request"].app.url_path_for(name, **params))


templates.env.globals["path_for"] = path_for


class Pages:
    def __init__(self, client: Client) -> None:
        self._client = client

    def jobs(self, request: Request) -> Response:
        """``/jobs?status=failed&tenant=acme&limit=50``; ``?q=ID`` opens that job."""
        query = request.query_params
        if found := query.get("q", "").strip():
            return RedirectResponse(request.app.url_path_for("job", job_id=found), status_code=303)
        statuses = [s for s in query.getlist("status") if s]
        unknown = [s for s in statuses if s not in LISTED]
        if unknown:
            raise HTTPException(400, f"no status {unknown[0]!r}: one of {', '.join(sorted(LISTED))}")
        limit = _limit(query.get("limit"))
        tenant = query.get("tenant", "").strip() or None
        client, now = self._client, datetime.now(UTC)
        entries = client.jobs([JobStatus(s) for s in statuses], tenant, limit)
        roots = {e.job_id: client.ledger.agent(e.job_id, ROOT_AGENT_ID) for e in entries}
        return templates.TemplateResponse(
            request,
            "jobs.html",
            {
                "entries": entries,
                "roots": roots,
                "ago": {e.job_id: views.ago(e.submitted_at, now) for e in entries},
                "statuses": sorted(LISTED),
                "chosen": set(statuses),
                "tenant": tenant or "",
                "limit": limit,
                "limits": LIMITS,
            },
        )

    def job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        handle = self._client.job(job_id)
        # In this order: the spend of agents still running is read before the event the
        # page follows from (an event after it adds its spend once, never twice), and
        # statuses after it (an event after it moves a status to where it already is).
        ledger = handle.ledger()
        after = self._client.events.last(job_id)
        status = handle.status()
        if status is JobStatus.UNKNOWN:
            raise HTTPException(404, _unknown(self._client, job_id))
        nodes = handle.tree()
        submission = self._client.index.submission(job_id)
        now = datetime.now(UTC)
        root = next((n for n in nodes if n.agent_id == ROOT_AGENT_ID), None)
        return templates.TemplateResponse(
            request,
            "job.html",
            {
                "job_id": job_id,
                "status": status,
                "spec": submission.spec if submission else {},
                "submitted": views.ago(datetime.fromtimestamp(submission.at, UTC), now) if submission else "",
                "rows": views.rows(nodes),
                "elapsed": {n.agent_id: views.elapsed(n, now) for n in nodes},
                "root": root,
                "ledger": ledger if ledger.root_id is not None else None,
                "spent": _spent(nodes, ledger),
                "share": views.share,
                "approvals": handle.pending(),
                "after": after,
                "refused": _refusal(handle) if status is JobStatus.REFUSED else None,
            },
        )

    def ledger(self, request: Request) -> Response:
        """The job's ledger totals as JSON (what the job page's ledger shows), read
        again by the page when a model call settles."""
        job_id = request.path_params["job_id"]
        row = self._client.ledger.agent(job_id, ROOT_AGENT_ID)
        if row is None:
            raise HTTPException(404, _unknown(self._client, job_id))
        return Response(row.model_dump_json(include=set(TOTALS)), media_type="application/json")

    def agent(self, request: Request) -> Response:
        job_id, agent_id = request.path_params["job_id"], request.path_params["agent_id"]
        handle = self._client.job(job_id)
        node = self._client.tree.node(job_id, agent_id)
        if node is None:
            if handle.status() is JobStatus.UNKNOWN:
                raise HTTPException(404, _unknown(self._client, job_id))
            raise HTTPException(404, f"job {job_id} has no agent {agent_id!r}")
        return templates.TemplateResponse(
            request,
            "agent.html",
            {"job_id": job_id, "node": node, "transcript": handle.transcript(agent_id)},
        )


def _spent(nodes: list[Node], ledger: LedgerSnapshot) -> dict[str, views.Spend]:
    rows = {row.agent_id: row for row in ledger.agents}
    return {n.agent_id: views.spend(n, rows.get(n.agent_id)) for n in nodes}


def _limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return LIMITS[0]
    if not raw.isdigit() or not 1 <= int(raw) <= LIMITS[-1]:
        raise HTTPException(400, f"limit {raw!r}: a whole number from 1 to {LIMITS[-1]}")
    return int(raw)


def _unknown(client: Client, job_id: str) -> str:
    return (
        f"no job {job_id!r} here: it was never submitted to this covey, or its records expired "
        f"({client.settings.job_ttl} s after it ended, COVEY_JOB_TTL)"
    )


def _refusal(handle: JobHandle) -> str:
    """Why a job that never started was refused, as its result says."""
    try:
        handle.result(timeout=REFUSAL_SECONDS, diagnose=False)
    except JobRefused as e:
        return str(e)
    except CoveyError as e:
        return f"(its refusal could not be read: {e})"
    return ""
