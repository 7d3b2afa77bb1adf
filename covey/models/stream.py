"""A streamed reply, read no further than the completion tokens reserved for it.

A server may ignore the reply cap it is sent (llama.cpp's OpenAI server reads
``max_tokens`` alone; others read neither), and a cap covey only checks after the
fact has already been spent past. So covey reads a reply as a stream and stops
reading, closing the connection, when the reply would pass what was reserved: the
reply is then cut (``finish_reason="length"``, as a server that honours the cap
says) and charged the reservation, since the server generated at least that.

What has been received is counted with the endpoint's tokenizer when it has one,
else as one token per chunk that carries text (servers stream a token a chunk),
or its non-ASCII bytes when more: a character of several tokens arrives in one
chunk (llama.cpp sent 58 chunks for 60 tokens), and no token is less than a byte.
A server's own ``usage`` chunk (``stream_options.include_usage``) is what an
uncut reply is charged; without one, covey's count is.

A caller that shows the reply as it comes is handed each piece of its text
(``on_text``) once the piece is counted within the cap.

Pure: the caller gives the chunks (JSON objects) and the clock, and closes the stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from covey.models.replies import ModelReply, ToolCall


class StreamTimeout(Exception):
    """The reply was still streaming at the call's deadline."""


@dataclass
class Streamed:
    """What was read: the reply, the tokens counted, the server's usage (its last
    ``usage`` object, None without one) and whether covey cut the reply."""

    reply: ModelReply
    received: int
    usage: Any = None
    cut: bool = False


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Reading:
    content: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None
    received: int = 0
    chose: bool = False  # some chunk carried a choice

    def reply(self, finish_reason: str | None) -> ModelReply:
        calls = [ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments)) for _, c in sorted(self.calls.items())]
        content = "".join(self.content) if self.content or not calls else None
        # A stream that never says why it ended said nothing of a cut: take it as stopped.
        return ModelReply(content=content, tool_calls=calls, finish_reason=finish_reason or "stop")


def read(
    chunks: Iterable[Any],
    cap: int,
    deadline: float,
    count: Callable[[str], int] | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_text: Callable[[str], None] | None = None,
) -> Streamed:
    """The reply in ``chunks``, read until they end or the next one would pass ``cap``
    tokens; ``StreamTimeout`` past ``deadline`` (on ``clock``). ``TypeError`` or
    ``ValueError`` for a chunk that is not what a chat-completion stream sends."""
    reading = _Reading()
    tokens = count or _at_most
    for chunk in chunks:
        if clock() > deadline:
            raise StreamTimeout(f"the reply was still streaming after {reading.received} tokens")
        if not isinstance(chunk, dict):
            raise TypeError(f"a stream chunk is a {type(chunk).__name__}, not an object")
        if chunk.get("usage") is not None:
            reading.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise TypeError(f"choices is a {type(choices).__name__}, not a list")
        for choice in choices[:1]:
            reading.chose = True
            delta = _object(choice.get("delta") if isinstance(choice, dict) else None, "delta")
            text = _text(delta.get("content"), "content")
            raw_calls = delta.get("tool_calls") or []
            if not isinstance(raw_calls, list):
                raise TypeError(f"tool_calls is a {type(raw_calls).__name__}, not a list")
            calls = [_CallDelta.of(call, len(reading.calls) + i) for i, call in enumerate(raw_calls)]
            generated = text + "".join(call.name + call.arguments for call in calls)
            spent = tokens(generated) if generated else 0
            if reading.received + spent > cap:
                return Streamed(reading.reply("length"), cap, cut=True)
            reading.received += spent
            if text:
                reading.content.append(text)
                if on_text is not None:
                    on_text(text)
            for call in calls:
                call.add_to(reading.calls)
            reading.finish_reason = _text(choice.get("finish_reason"), "finish_reason") or reading.finish_reason
    if not reading.chose:
        raise ValueError("no choices")
    return Streamed(reading.reply(reading.finish_reason), reading.received, reading.usage)


def _at_most(text: str) -> int:
    """The most tokens a streamed chunk of ``text`` can be: one, or its non-ASCII bytes."""
    return max(1, sum(len(char.encode("utf-8", "surrogatepass")) for char in text if ord(char) > 127))


@dataclass(frozen=True)
class _CallDelta:
    """One delta of a tool call, checked: its first names the call, the rest add to its arguments."""

    index: int
    id: str
    name: str
    arguments: str

    @classmethod
    def of(cls, delta: Any, unindexed: int) -> _CallDelta:
        """``unindexed``: the index of a delta that names none (a new call)."""
        delta = _object(delta, "tool call")
        index = delta.get("index", unindexed)
        if type(index) is not int:
            raise TypeError(f"tool call index is a {type(index).__name__}, not a number")
        function = _object(delta.get("function"), "function")
        return cls(
            index=index,
            id=_text(delta.get("id"), "tool call id"),
            name=_text(function.get("name"), "tool call name"),
            arguments=_text(function.get("arguments"), "tool call arguments"),
        )

    def add_to(self, calls: dict[int, _Call]) -> None:
        call = calls.setdefault(self.index, _Call())
        call.id = self.id or call.id
        if self.name != call.name:  # llama.cpp repeats the whole name in every delta; OpenAI sends it once
            call.name += self.name
        call.arguments.append(self.arguments)


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{what} is a {type(value).__name__}, not an object")
    return value


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{what} is a {type(value).__name__}, not text")
    return value
