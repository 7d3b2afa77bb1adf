"""The endpoint's own tokenizer, asked over HTTP (``tokenizer = "server"``).

llama.cpp's and vLLM's servers count tokens for their clients, so a model served
by one needs no tokenizer file for exact first-call reservations: covey asks the
first route that answers (llama-cpp-python's ``/extras/tokenize/count``, llama.cpp's
``/tokenize``, vLLM's ``/tokenize``) and keeps it. A count the server cannot make
(down, no such route) falls back to the bytes, the bound that always holds.

It counts text, not a chat: a request's JSON is counted as it is, which bounds what
the template makes of plain messages (llama-cpp-python: 54 counted for 43 billed)
but not the preamble a template writes for tools (266 billed for 174 counted, its
function-calling format), so a request offering tools is bounded by its bytes
(``covey.models.tokens``), and a streamed reply is counted by its chunks as it
arrives and by the server only once whole (``covey.models.chat``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx2

from covey.models.tokenizers import FRAMING_TOKENS
from covey.models.tokens import byte_tokens

log = logging.getLogger(__name__)

SERVER_TOKENIZER = "server"
COUNT_SECONDS = 5.0
RETRY_SECONDS = 60.0  # after no route answered, the bytes bound the counts this long before the server is asked again


def _llama_cpp_python(text: str, model: str) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
    return "/extras/tokenize/count", {"input": text}, lambda body: body["count"]


def _llama_cpp(text: str, model: str) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
    return "/tokenize", {"content": text}, lambda body: len(body["tokens"])


def _vllm(text: str, model: str) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
    return "/tokenize", {"model": model, "prompt": text, "add_special_tokens": False}, lambda body: body["count"]


ROUTES = (_llama_cpp_python, _llama_cpp, _vllm)


class ServerTokenizer:
    name = SERVER_TOKENIZER
    overhead = FRAMING_TOKENS
    remote = True

    def __init__(self, base_url: str, model: str, api_key: str | None, transport: httpx2.BaseTransport | None = None):
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        root = base_url.rstrip("/").removesuffix("/v1")
        self._http = httpx2.Client(base_url=root, headers=headers, timeout=COUNT_SECONDS, transport=transport)
        self._model = model
        self._route: Callable[[str, str], tuple[str, dict[str, Any], Callable[[Any], Any]]] | None = None
        self._unanswered_until = 0.0
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        """The server's count of ``text``; its bytes when no route of it answers."""
        if time.monotonic() < self._unanswered_until:
            return byte_tokens(text)
        routes = [self._route] if self._route is not None else list(ROUTES)
        for route in routes:
            path, body, read = route(text, self._model)
            try:
                response = self._http.post(path, json=body)
                counted = read(response.json()) if response.status_code == 200 else None
            except (httpx2.HTTPError, ValueError, KeyError, TypeError):
                counted = None
            if type(counted) is int and counted >= 0:
                with self._lock:
                    self._route = route
                return counted
        self._unanswered_until = time.monotonic() + RETRY_SECONDS
        log.warning(
            "tokenizer server: %s counts no tokens; bounding by bytes for %gs", self._http.base_url, RETRY_SECONDS
        )
        return byte_tokens(text)
