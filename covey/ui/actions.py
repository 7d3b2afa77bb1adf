"""What a person does from a job's page: cancel it, send it again, approve or deny
a waiting tool call. Each is a POST of JSON (the page's buttons send it with
``fetch``), answered with JSON: ``{"ok": true, ...}`` or ``{"error": "..."}``.

A browser sends a cross-site POST of JSON only after a CORS preflight, which this
app never grants, and every POST must come from the page's own origin when it
names one: another site open in the same browser cannot cancel a job.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from covey.client import Client, JobHandle
from covey.client.approvals import JobEnded
from covey.client.errors import UnknownJob
from covey.errors import CoveyError
from covey.status import JobStatus
from covey.store.approvals import UnknownApproval

REASON_CHARS = 500  # a denial's reason, as the model reads it


class Actions:
    def __init__(self, client: Client) -> None:
        self._client = client

    async def cancel(self, request: Request) -> JSONResponse:
        return await _acted(request, self._cancel)

    async def retry(self, request: Request) -> JSONResponse:
        return await _acted(request, self._retry)

    async def decide(self, request: Request) -> JSONResponse:
        return await _acted(request, self._decide)

    def _cancel(self, job_id: str, _: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
        handle = self._known(job_id)
        status = handle.status()
        if status.final:
            raise JobEnded(f"job {job_id} is finished ({status.value}): nothing to cancel")
        handle.cancel()
        return {"ok": True}

    def _retry(self, job_id: str, _: dict[str, Any], __: dict[str, str]) -> dict[str, Any]:
        return {"ok": True, "job_id": self._client.retry(job_id).id}

    def _decide(self, job_id: str, body: dict[str, Any], path: dict[str, str]) -> dict[str, Any]:
        decision, reason = body.get("decision"), body.get("reason") or None
        if decision not in ("approved", "denied"):
            raise ValueError('give "decision": "approved" or "denied"')
        if reason is not None and (not isinstance(reason, str) or len(reason) > REASON_CHARS):
            raise ValueError(f'"reason": text of at most {REASON_CHARS} characters')
        handle = self._known(job_id)
        call_id = path["call_id"]
        decided = handle.approve(call_id) if decision == "approved" else handle.deny(call_id, reason)
        standing = decided.approval.decision
        return {"ok": True, "recorded": decided.recorded, "decision": standing}

    def _known(self, job_id: str) -> JobHandle:
        handle = self._client.job(job_id)
        if handle.status() is JobStatus.UNKNOWN:
            raise UnknownJob(job_id, "no record of it")
        return handle


async def _acted(request: Request, act: Any) -> JSONResponse:
    """Run ``act(job_id, body, path)`` in a thread once the request is shown to be
    the page's own; every refusal is one line of JSON with its HTTP status."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        return JSONResponse({"error": f"a request from {origin} may not act here"}, status_code=403)
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        return JSONResponse({"error": "the body is not JSON"}, status_code=400)
    if not isinstance(body, dict):
        return JSONResponse({"error": "the body is not a JSON object"}, status_code=400)
    try:
        done = await run_in_threadpool(act, request.path_params["job_id"], body, dict(request.path_params))
    except (UnknownJob, UnknownApproval) as e:
        return JSONResponse({"error": str(e)}, status_code=404)
    except JobEnded as e:
        return JSONResponse({"error": str(e)}, status_code=409)
    except ValueError as e:  # a body that asks for what no action does
        return JSONResponse({"error": str(e)}, status_code=400)
    except CoveyError as e:  # Redis or the broker away past the client's allowance
        return JSONResponse({"error": str(e)}, status_code=503)
    return JSONResponse(done)
