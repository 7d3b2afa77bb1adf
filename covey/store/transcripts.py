"""Every agent's transcript: the messages it sent, each model call and each tool call.

One Redis hash per agent (``keys.transcript``), under the job's hash tag and kept
for the job's TTL. An entry is one event, keyed by the agent's cycle, so a
redelivered step that records the same events again writes nothing twice, and
keys sort in the order the events happened. No round trip is spent on it: the
worker hands an agent's new entries to the next store write its step makes
anyway (a tree record, its checkpoint, its end), whose script appends them
(``lua/transcript.lua``), capped per agent.

``ModelCallEvent`` and ``ToolCallEvent`` are the facts of one call, for anything
that wants them besides the transcript (a span, a metric).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from importlib.resources import files
from typing import Annotated, Any, Literal

import redis
from pydantic import BaseModel, Field

from covey import keys
from covey.redis_scripts import source
from covey.results import Usage

_APPEND = (files("covey.store") / "lua" / "transcript.lua").read_text(encoding="utf-8")
_META = ("bytes", "cut_from", "cut_to", "cut_entries", "cut_bytes")


def script(name: str, *libs: str) -> str:
    """The source of ``lua/<name>`` after ``libs``, able to write events and append
    transcript entries (``transcript.lua``)."""
    return source("covey.store", name, _APPEND, *libs, events=True)


class ModelCallEvent(BaseModel):
    """One model call: what it sent that the previous call had not (``sent``; all of
    it when ``continues`` is false, as for a first call), what came back, and
    what it cost. ``latency_ms`` and ``at`` (its start) are None for a call
    settled by a worker that kept neither."""

    kind: Literal["model"] = "model"
    cycle: int
    sent: list[dict[str, Any]] = Field(default_factory=list)
    continues: bool = False
    model: str
    params: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list, description="the tools the call offered")
    reply: dict[str, Any] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    error: str | None = None
    latency_ms: float | None = None
    at: datetime | None = None
    cached: bool = False  # served from the reply cache: the model was not called, nothing charged
    answered_by: str | None = None  # the fallback that answered, charged at its price, when ``model`` failed


class ToolCallEvent(BaseModel):
    """One tool call run in the worker: its arguments as the model sent them and the
    text the model read back (``error`` when that text reports a failure).
    ``latency_ms`` is None for a result replayed from an earlier run of the step."""

    kind: Literal["tool"] = "tool"
    cycle: int
    call_id: str
    tool: str
    arguments: str
    result: str
    error: bool = False
    latency_ms: float | None = None
    at: datetime | None = None


Event = Annotated[ModelCallEvent | ToolCallEvent, Field(discriminator="kind")]


def entry_key(cycle: int, tool_index: int | None = None) -> str:
    """The key of a cycle's model call, or of its ``tool_index``-th tool call: keys
    sort as the events happened, a cycle's model call before its tool calls."""
    return f"{cycle:08d}.m" if tool_index is None else f"{cycle:08d}.t{tool_index:04d}"


def event_of(key: str, entry: str) -> ModelCallEvent | ToolCallEvent:
    """An entry as stored: its key says its kind, so the entry leaves out every default."""
    kind = ModelCallEvent if key.endswith(".m") else ToolCallEvent
    return kind.model_validate_json(entry)


def describe_key(key: str) -> str:
    """An entry key as a person reads it: ``call 7``, ``tool call 2 of call 7``."""
    cycle, kind = key.split(".", 1)
    return f"call {int(cycle)}" if kind == "m" else f"tool call {int(kind[1:]) + 1} of call {int(cycle)}"


@dataclass(frozen=True)
class Entries:
    """An agent's entries not yet in Redis, for the next write of its step to carry."""

    key: str
    cap: int
    fields: list[tuple[str, str]]


def tail(entries: Entries | None) -> tuple[list[str], list[str | int]]:
    """The KEYS and ARGV to end a carrying script's with (``lua/transcript.lua``)."""
    if entries is None or not entries.fields:
        return [], [0]
    args: list[str | int] = [entries.cap]
    for field, value in entries.fields:
        args += [field, value]
    return [entries.key], [*args, len(args)]


class Cut(BaseModel):
    """Where a transcript stopped keeping entries, and how much it left out."""

    at: str = Field(description="the first entry cut, as a person reads it (``call 7``)")
    entries: int
    bytes: int


class Transcript(BaseModel):
    job_id: str
    agent_id: str
    events: list[Event]
    bytes: int = Field(description="what the kept entries take in Redis")
    cut: Cut | None = None


class Transcripts:
    """Reads the transcripts the worker's scripts wrote."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def read(self, job_id: str, agent_id: str) -> Transcript | None:
        """The agent's transcript, or None when it has none (never recorded, or expired)."""
        raw = {_text(k): _text(v) for k, v in self._redis.hgetall(keys.transcript(job_id, agent_id)).items()}
        if not raw:
            return None
        meta = {name: raw.pop(name, None) for name in _META}
        events = [event_of(k, raw[k]) for k in sorted(raw)]
        cut = None
        if meta["cut_from"]:
            cut = Cut(
                at=describe_key(meta["cut_from"]),
                entries=int(meta["cut_entries"] or 0),
                bytes=int(meta["cut_bytes"] or 0),
            )
        return Transcript(job_id=job_id, agent_id=agent_id, events=events, bytes=int(meta["bytes"] or 0), cut=cut)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
