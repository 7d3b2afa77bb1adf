"""Serve the ``sim`` model over HTTP for clients that cannot take an injected transport.

Each HTTP request becomes an ``httpx2.Request`` for the very handler of
``covey.models.sim.handler``, so the replies match the in-process transport exactly.
Point the OpenAI SDK at ``base_url="http://HOST:PORT/v1"``.
Run it with ``covey sim-server``.

Unlike the stateless handler, the server counts the chat-completion calls that reach
it, so a test can prove a step was sent once, and how many it answers at once, so
a test can prove a cap on running agents holds: ``GET /sim/calls`` answers
``{"total": N, "by_body": {DIGEST: N, ...}, "in_flight": N, "most_in_flight": N}``
(``DIGEST``: the first 12 hex digits of the SHA-1 of the raw request body;
``most_in_flight``: the most calls it was answering at one moment); ``DELETE
/sim/calls`` answers the same and resets the counts and the most in flight.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2

from covey.models.sim.handler import is_chat_completion, make_handler

log = logging.getLogger(__name__)

STALL_MARGIN_S = 0.5  # a ``timeout`` fault outlasts the client's read timeout by this much
STALL_CAP_S = 30.0  # ...but never ties up a server thread longer than this
_HOP_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding"})
CALLS_PATH = "/sim/calls"


class _CallCounts:
    """Chat-completion calls by body digest; locked, as the server answers on many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_body: Counter[str] = Counter()
        self._in_flight = self._most_in_flight = 0

    def add(self, body: bytes) -> None:
        """A call arrives: counted, and in flight until ``done``."""
        with self._lock:
            self._by_body[hashlib.sha1(body).hexdigest()[:12]] += 1
            self._in_flight += 1
            self._most_in_flight = max(self._most_in_flight, self._in_flight)

    def done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def report(self, *, reset: bool = False) -> dict[str, Any]:
        """The counts so far, cleared in the same step when ``reset`` (so no call slips between)."""
        with self._lock:
            by_body, in_flight, most = dict(self._by_body), self._in_flight, self._most_in_flight
            if reset:
                self._by_body.clear()
                self._most_in_flight = self._in_flight
        return {"total": sum(by_body.values()), "by_body": by_body, "in_flight": in_flight, "most_in_flight": most}


def _counting(
    handle: Callable[[httpx2.Request], httpx2.Response], calls: _CallCounts
) -> Callable[[httpx2.Request], httpx2.Response]:
    """``handle`` counting each chat-completion call as it arrives, and serving the counts."""

    def counted(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == CALLS_PATH and request.method in ("GET", "DELETE"):
            return httpx2.Response(200, json=calls.report(reset=request.method == "DELETE"))
        if not is_chat_completion(request):
            return handle(request)
        calls.add(request.content)
        try:
            return handle(request)
        finally:
            calls.done()

    return counted


def make_server(
    host: str = "127.0.0.1",
    port: int = 8765,
    latency_ms: int = 0,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> ThreadingHTTPServer:
    """A not-yet-running server (``port=0`` picks a free port: read ``server_address``)."""
    handle = _counting(make_handler(latency_ms, sleep=sleep), _CallCounts())

    class _Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _relay(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            request = httpx2.Request(
                self.command,
                f"http://{self.headers.get('host', 'sim')}{self.path}",
                headers=list(self.headers.items()),
                content=self.rfile.read(length),
            )
            try:
                response = handle(request)
            except httpx2.TimeoutException:
                sleep(_stall_seconds(request))
                response = httpx2.Response(504, json={"error": {"message": "sim timeout", "type": "timeout"}})
            try:
                self._write(response)
            except (BrokenPipeError, ConnectionResetError):
                log.debug("sim client went away before its response was written")

        def _write(self, response: httpx2.Response) -> None:
            body = response.read()
            self.send_response(response.status_code)
            for name, value in response.headers.items():
                if name.lower() not in _HOP_HEADERS:
                    self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

        def log_message(self, format: str, *args: object) -> None:
            log.debug("sim %s", format % args)

    server = ThreadingHTTPServer((host, port), _Relay)
    server.daemon_threads = True  # a stalled ``timeout`` reply must not block shutdown
    return server


def serve(server: ThreadingHTTPServer) -> None:
    """Serve until interrupted (blocking)."""
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _stall_seconds(request: httpx2.Request) -> float:
    """How long to stall so the client times out: its read timeout plus a margin, capped."""
    try:
        read_timeout = float(request.headers.get("x-stainless-read-timeout", STALL_CAP_S))
    except ValueError:
        read_timeout = STALL_CAP_S
    return min(read_timeout + STALL_MARGIN_S, STALL_CAP_S)
