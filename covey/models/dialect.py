"""What an endpoint's server understands, as a worker learns it: which names of the
reply cap it is sent, how it is asked for a JSON answer, and whether it can stream
a request that offers tools.

OpenAI-compatible servers differ. llama.cpp's reads the reply cap as ``max_tokens``
alone, OpenAI's reasoning models refuse ``max_tokens``; one server refuses a
``json_schema`` response_format that another requires. covey sends the cap under
every name by default (it cuts a reply that passes it anyway, ``covey.models.stream``)
and asks in the models file's structured mode; a request refused with an error
that names one of these is asked again once without it, and the endpoint keeps
that dialect for the rest of the worker's life. So does one whose streamed
answer to a request offering tools was empty (llama-cpp-python's
function-calling format cannot stream a tool call it chose itself): its requests
with tools go unstreamed, where covey can no longer cut a reply at its cap. What
a server refused is learnt for every models-file entry of that model at that
address, each keeping the rest of its own dialect (``Dialects``).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from covey.models.structured import StructuredMode

ReplyCap = Literal["max_tokens", "max_completion_tokens"]
REPLY_CAPS: tuple[ReplyCap, ...] = ("max_tokens", "max_completion_tokens")
_CAP_NAMED = re.compile(r"\bmax_(?:completion_)?tokens\b")
_STRUCTURED_NAMED = re.compile(r"response_format|json_schema|json_object")


@dataclass(frozen=True)
class Dialect:
    caps: tuple[ReplyCap, ...]
    structured: StructuredMode
    stream_tools: bool = True  # False: requests offering tools are not streamed (the server cannot)

    def refused(self, message: str, structured: bool) -> tuple[Dialect, str] | None:
        """The dialect to ask again in after a refusal saying ``message`` (``structured``:
        the request asked for JSON), with what changed; None when it names nothing
        this dialect can do without."""
        if structured and self.structured != "tools" and _STRUCTURED_NAMED.search(message):
            return replace(self, structured="tools"), "asks for JSON answers in tools mode"
        named = _CAP_NAMED.search(message)  # the name a message says first is the one refused
        if named is not None and named.group() in self.caps and len(self.caps) > 1:
            left = tuple(cap for cap in self.caps if cap != named.group())
            return replace(self, caps=left), f"sends the reply cap as {left[0]} alone"
        return None


class Spoken(Protocol):
    """An endpoint, as far as its dialect goes (``covey.models.catalog.Endpoint``)."""

    @property
    def key(self) -> tuple[str | None, str]: ...

    @property
    def dialect(self) -> Dialect: ...


@dataclass(frozen=True)
class Lessons:
    """What refusals taught of one model at one address: applied to the dialect each
    models-file entry of it names, so two entries of one server share what the server
    refuses and keep the rest of their own (one's structured mode, another's caps)."""

    refused_caps: frozenset[ReplyCap] = frozenset()
    refused_modes: frozenset[StructuredMode] = frozenset()  # asked for in tools mode instead
    no_tool_streams: bool = False

    def applied(self, own: Dialect) -> Dialect:
        """``own`` without what was refused; a cap name all of whose names were refused
        is kept (the server's next refusal of it is the caller's error)."""
        caps = tuple(cap for cap in own.caps if cap not in self.refused_caps) or own.caps
        structured: StructuredMode = "tools" if own.structured in self.refused_modes else own.structured
        return Dialect(caps, structured, own.stream_tools and not self.no_tool_streams)

    def and_from(self, before: Dialect, after: Dialect) -> Lessons:
        """These lessons and what going from ``before`` to ``after`` taught."""
        return Lessons(
            self.refused_caps | frozenset(before.caps).difference(after.caps),
            self.refused_modes | ({before.structured} if after.structured != before.structured else set()),
            self.no_tool_streams or (before.stream_tools and not after.stream_tools),
        )


class Dialects:
    """Each endpoint's dialect in this worker, from its models-file entry as the
    lessons of its server's refusals change it."""

    def __init__(self) -> None:
        self._learnt: dict[tuple[str | None, str], Lessons] = {}
        self._lock = threading.Lock()

    def of(self, endpoint: Spoken) -> Dialect:
        with self._lock:
            return self._of(endpoint)

    def learn(self, endpoint: Spoken, dialect: Dialect) -> None:
        """``endpoint`` is now spoken in ``dialect``: what changed from its dialect so far
        is learnt for every entry of its model at its address."""
        with self._lock:
            lessons = self._learnt.get(endpoint.key, Lessons())
            self._learnt[endpoint.key] = lessons.and_from(self._of(endpoint), dialect)

    def _of(self, endpoint: Spoken) -> Dialect:
        lessons = self._learnt.get(endpoint.key)
        return endpoint.dialect if lessons is None else lessons.applied(endpoint.dialect)


DIALECTS = Dialects()  # this worker process's: what its endpoints have been learnt to take
