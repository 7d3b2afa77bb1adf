"""The ``covey ui`` web app (Starlette, served by uvicorn): one client of covey's
Redis shared by every request, and HTTP basic auth when it is given users."""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from covey.client import Client
from covey.ui.events import JobEvents


def create_app(client: Client, users: dict[str, str] | None = None) -> Starlette:
    """The app over ``client``; with ``users`` (user -> password), every request
    must give one of them."""
    events = JobEvents(client)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        events.close()

    middleware = [Middleware(BasicAuth, users=users)] if users else []
    return Starlette(routes=[Route("/jobs/{job_id}/events", events.respond)], middleware=middleware, lifespan=lifespan)


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
