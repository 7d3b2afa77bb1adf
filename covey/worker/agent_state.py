"""What an agent must remember across a fan-out, and the checkpoint format Redis keeps it in.

A checkpoint is ``{"format": 3, "strategy": <name>, "state": <the strategy's state>,
"agent": <the rest of AgentState>}``, the agent's ``phase`` among the rest. The strategy's state is read with the model
its strategy declares (``State``), so a checkpoint is read only as what it is: one
of another strategy, or not JSON at all is refused with an ``UnreadableCheckpoint``,
never guessed at. A checkpoint of the format before (2, without the phase) is
migrated as it is read, so agents a worker of the previous release left waiting
go on after an upgrade (``_from_format_2``); an older one (format 1 had no
version: the strategy's state was a bare dict inside the agent's) is refused.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from covey.budgets.ledger import Settling
from covey.context import RunContext
from covey.errors import describe
from covey.models.tokens import PromptMark
from covey.orchestration import registry
from covey.results import AgentResult, ChildSummary, Usage
from covey.spec import AgentSpec
from covey.status import AgentStatus, Wait
from covey.store.tree import Node, preview

_HOST = socket.gethostname()  # a fork keeps its host; its pid is read at each use

# 3: the agent's phase; 2: typed strategy states in an envelope; 1 (unversioned): the state a dict in the agent
CHECKPOINT_FORMAT = 3


class Phase(StrEnum):
    """Where an agent stands between its steps, which tells the task that takes it up
    whether that task is the one it waits for."""

    RUNNING = "running"  # a step runs it
    AWAITING_CHILDREN = (
        "awaiting_children"  # its children run: the last one (or, joined as each ends, the next) resumes it
    )
    AWAITING_SLOT = "awaiting_slot"  # it gave its worker slot back to wait for a scope's running cap or window
    AWAITING_APPROVAL = "awaiting_approval"  # it gave its worker slot back until a person decides on a tool call
    PAUSED = "paused"  # its task's slice ran out: a new task takes it up at once
    FINISHED = "finished"  # it ended: its final record holds it, and no checkpoint does


class PendingChild(BaseModel):
    """One child of the current fan-out: running (``agent_id``) or refused at open."""

    agent_id: str
    refused: AgentResult | None = None
    key: str | None = None  # the strategy's name for it (``ChildRequest.key``)


class TranscriptCursor(BaseModel):
    """How far the agent's transcript has come (``covey.worker.transcript``): the
    messages its last model call sent (their count, and the digest of the last),
    so the next call records only what it adds, and the entries its step has not
    yet written."""

    sent: int = 0
    digest: str = ""
    # Never checkpointed: written with it. A default, copied for each cursor, not
    # default_factory=list: pydantic reads a factory's signature at every construction,
    # and the builtin's comes from parsing its text (a quarter of a millisecond).
    _pending: list[tuple[str, str]] = PrivateAttr(default=[])


class AgentState(BaseModel):
    ctx: RunContext
    spec: AgentSpec
    phase: Phase = Phase.RUNNING
    strategy_state: BaseModel = Field(description="the state of the agent's strategy, of its ``State`` model")
    cycle: int = Field(default=0, description="model calls made; names the next reservation")
    usage: Usage = Field(default_factory=Usage, description="own calls plus finished children")
    children: list[ChildSummary] = Field(default_factory=list)
    spawn_round: int = 0
    pending: list[PendingChild] = Field(default_factory=list)
    waiting_for: Wait | None = Field(
        default=None,
        description="what it gave its worker slot back to wait for (a scope's cap or window, a person's decision)",
    )
    as_completed: bool = Field(default=False, description="its pending children join as each finishes")
    started_at: datetime
    task_id: str | None = Field(default=None, description="the Celery task running this agent")
    deadline: datetime | None = Field(default=None, description="the agent's own timeout")
    task_deadline: datetime | None = Field(
        default=None, description="when the running task checkpoints and goes on as a new one (COVEY_SLICE_SECONDS)"
    )
    step: int = Field(default=0, description="checkpoints saved: orders them, so a stale task cannot overwrite a newer")
    next_action: dict[str, Any] | None = Field(
        default=None, description="the Action a paused agent takes when its next task starts"
    )
    recorded_at: datetime | None = Field(
        default=None, description="when its running node was last written (None: not since it waited)"
    )
    prompt_mark: PromptMark | None = Field(
        default=None, description="what its last call sent and what that prompt cost: the next call's bound"
    )
    transcript: TranscriptCursor = Field(default_factory=TranscriptCursor)
    # Never checkpointed: its last model call's settlement, while its agent's final
    # record may still carry it (``covey.worker.calls.settle_owed``).
    _unsettled: Settling | None = PrivateAttr(default=None)

    def node(self, status: AgentStatus) -> Node:
        """The agent's tree node as it stands: its usage so far, for readers and the crash
        path; a running one names this worker process, for its agent.running event."""
        ctx = self.ctx
        return Node(
            agent_id=ctx.agent_id,
            parent_id=ctx.parent_id,
            depth=ctx.depth,
            role=self.spec.role,
            status=status,
            usage=self.usage,
            task=preview(self.spec.task),
            task_id=self.task_id,
            started_at=self.started_at,
            wait=self.waiting_for if status is AgentStatus.WAITING else None,
            worker=f"{_HOST}:{os.getpid()}" if status is AgentStatus.RUNNING else None,
        )


Cause = Literal["unparseable", "format", "strategy"]


class UnreadableCheckpoint(ValueError):
    """A checkpoint this worker refuses to read. ``cause`` says why: ``unparseable``
    (not JSON, or not an agent's), ``format`` (another format version) or
    ``strategy`` (a state that is not its agent's strategy's)."""

    def __init__(self, cause: Cause, detail: str) -> None:
        super().__init__(f"checkpoint refused: {detail}")
        self.cause = cause


def dump_checkpoint(agent: AgentState) -> str:
    return json.dumps(
        {
            "format": CHECKPOINT_FORMAT,
            "strategy": agent.spec.strategy,
            "state": agent.strategy_state.model_dump(mode="json"),
            "agent": agent.model_dump(mode="json", exclude={"strategy_state"}),
        }
    )


def _from_format_2(raw: dict[str, Any]) -> dict[str, Any]:
    """A format-2 checkpoint as format 3: the phase its agent stood in, as the tasks
    of that release told it (a proceed took up an agent with a next action, a
    resume one without that waited on children); its other fields are read as they are."""
    agent = raw.get("agent")
    if not isinstance(agent, dict):
        return raw  # refused below, as any checkpoint without an agent
    slot = agent.get("waiting_for") is not None
    if agent.get("next_action") is not None:
        phase = Phase.AWAITING_SLOT if slot else Phase.PAUSED
    else:
        phase = Phase.AWAITING_CHILDREN if agent.get("pending") else Phase.RUNNING
    return {**raw, "format": CHECKPOINT_FORMAT, "agent": {**agent, "phase": phase.value}}


def load_checkpoint(text: str) -> AgentState:
    """The AgentState ``dump_checkpoint`` wrote, its strategy's state typed again."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise UnreadableCheckpoint("unparseable", f"not JSON ({e})") from e
    if not isinstance(raw, dict):
        raise UnreadableCheckpoint("unparseable", f"a JSON {type(raw).__name__}, not an object")
    found = raw.get("format")
    if found == 2:
        raw = _from_format_2(raw)
    elif found != CHECKPOINT_FORMAT:
        written = "with no format version (format 1)" if found is None else f"of format {found!r}"
        raise UnreadableCheckpoint("format", f"written {written}; this worker reads format {CHECKPOINT_FORMAT}")
    name = raw.get("strategy")
    try:
        strategy = registry.strategy(name)
    except (registry.UnknownStrategy, TypeError) as e:
        raise UnreadableCheckpoint("strategy", f"its strategy {name!r} is unknown here") from e
    try:
        state = strategy.State.model_validate(raw.get("state"))
    except ValidationError as e:
        raise UnreadableCheckpoint("strategy", f"its state is not one of strategy {name!r}: {describe(e)}") from e
    try:
        agent = AgentState.model_validate({**raw.get("agent", {}), "strategy_state": state})
    except (ValidationError, TypeError) as e:
        detail = describe(e) if isinstance(e, ValidationError) else str(e)
        raise UnreadableCheckpoint("unparseable", f"not an agent's state: {detail}") from e
    if agent.spec.strategy != name:
        ran = agent.spec.strategy
        raise UnreadableCheckpoint("strategy", f"its state is of strategy {name!r}, its agent runs {ran!r}")
    return agent
