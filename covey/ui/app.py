"""The ``covey ui`` web app (Starlette, served by uvicorn): one client of covey's
Redis shared by every request, and HTTP basic auth when it is given users.

Every error is one page (or, under ``/jobs/{id}/events`` and the actions, one
line of JSON) with its HTTP status, never a stack trace."""

from __future__ import annotations

import base64
import binascii
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import redis
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from covey.client import Client
from covey.errors import CoveyError
from covey.ui.actions import Actions
from covey.ui.events import JobEvents
from covey.ui.pages import Pages, templates
from covey.ui.sweeps import SweepPages

log = logging.getLogger(__name__)


def create_app(client: Client, users: dict[str, str] | None = None, sweeps: Path | None = None) -> Starlette:
    """The app over ``client``; with ``users`` (user -> password), every request
    must give one of them; ``sweeps``: the folder whose directories are sweeps."""
    events = JobEvents(client)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        events.close()

    pages, actions, swept = Pages(client), Actions(client), SweepPages(client, sweeps)
    routes = [
        Route("/", lambda request: RedirectResponse(request.app.url_path_for("jobs"))),
        Route("/jobs", pages.jobs, name="jobs"),
        Route("/jobs/{job_id}", pages.job, name="job"),
        Route("/jobs/{job_id}/events", events.respond),
        Route("/jobs/{job_id}/ledger", pages.ledger),
        Route("/jobs/{job_id}/agents/{agent_id}", pages.agent, name="agent"),
        Route("/jobs/{job_id}/cancel", actions.cancel, methods=["POST"]),
        Route("/jobs/{job_id}/retry", actions.retry, methods=["POST"]),
        Route("/jobs/{job_id}/approvals/{call_id}", actions.decide, methods=["POST"]),
        Route("/sweeps", swept.sweeps, name="sweeps"),
        Route("/sweeps/{name}", swept.sweep, name="sweep"),
        Route("/sweeps/{name}/summary.png", swept.chart, name="sweep_chart"),
        Route("/sweeps/{name}/samples/{sample_id}", swept.sample, name="sweep_sample"),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]
    middleware = [Middleware(BasicAuth, users=users)] if users else []
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: _refused,
            CoveyError: _unavailable,
            redis.RedisError: _unreached,
            Exception: _broken,
        },
    )


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, exc.detail)


async def _unavailable(request: Request, exc: Exception) -> Response:
    return _error(request, 503, str(exc))  # Redis away past the client's allowance: it says where


async def _unreached(request: Request, exc: Exception) -> Response:
    # A read the client's outage handling does not wrap: its class says why, never its URL.
    return _error(request, 503, f"covey ui could not read Redis ({type(exc).__name__}); try again")


async def _broken(request: Request, exc: Exception) -> Response:
    log.exception("covey ui: %s %s", request.method, request.url.path)
    return _error(request, 500, f"covey ui failed on this page ({type(exc).__name__}); its log says more")


def _error(request: Request, status: int, said: str) -> Response:
    return templates.TemplateResponse(request, "error.html", {"status": status, "said": said}, status_code=status)


class BasicAuth:
    """Answers 401 to a request without one of ``users``' name and password."""

    def __init__(self, app: ASGIApp, users: dict[str, str]) -> None:
        self._app, self._users = app, users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(dict(scope["headers"]).get(b"authorization", b"")):
            refused = PlainTextResponse(
                "covey ui: give a user and password (--basic-auth)",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="covey"'},
            )
            await refused(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _allowed(self, header: bytes) -> bool:
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            user, _, password = base64.b64decode(token, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        known = self._users.get(user)
        return known is not None and secrets.compare_digest(known.encode(), password.encode())
