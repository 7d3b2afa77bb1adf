"""A model call's outcome as the ledger keeps it, so a redelivered step replays it.

The settle stores this record with the reservation; a step that runs again (its
worker died before the ack) reserves the same id, gets the record back, and uses
it instead of calling the model: the provider bills the call once, and a replayed
parent makes the same decisions (the same children) as the first run.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from covey.models.replies import ModelReply, ToolCall
from covey.results import Usage
from covey.status import Cause


class CallRecord(BaseModel):
    """A reply with its usage, or the error (and its cause) that ended the call; when
    the call started and how long it took, so its transcript reads the same replayed.
    ``unanswered``: the call was sent and never answered (charged its reservation)."""

    reply: dict[str, Any] | None = None
    usage: Usage | None = None
    error: str | None = None
    cause: Cause | None = None
    at: datetime | None = None
    latency_ms: float | None = None
    unanswered: bool = False
    cached: bool = False  # served from the reply cache (covey.store.model_cache), charged nothing
    key: str | None = None  # the strategy's digest of the request (``CallModel.key``), checked on a replay

    @classmethod
    def of_reply(
        cls, reply: ModelReply, usage: Usage, at: datetime | None = None, latency_ms: float | None = None
    ) -> CallRecord:
        return cls(reply=asdict(reply), usage=usage, at=at, latency_ms=latency_ms)

    @property
    def answered_by(self) -> str | None:
        """The fallback that answered for the model asked, if one did."""
        return (self.reply or {}).get("model")

    def model_reply(self) -> ModelReply:
        if self.reply is None:
            raise ValueError("this record holds an error, not a reply")
        raw = dict(self.reply)
        calls = [ToolCall(**c) for c in raw.pop("tool_calls", [])]
        return ModelReply(tool_calls=calls, **raw)
