"""What a strategy asks the worker to do next, and what the worker hands back.

Strategies are pure state machines over typed states (``covey.orchestration.states``):
``start(spec, ctx)`` and ``resume(spec, ctx, state, outcome)`` both return an Action
carrying the new state, a pydantic model the worker checkpoints as JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from covey.models.replies import ModelReply, ToolCall
from covey.results import AgentResult
from covey.status import AgentStatus, Cause


@dataclass(frozen=True)
class ChildRequest:
    """A sub-agent a strategy asks for. What it leaves unset the child takes from
    its parent (strategy with its options, model, ``max_cycles``); its tools are
    always cut to what the parent was offered, and its budget to what the parent
    has left. ``can_spawn = False`` offers it no spawn tool, whatever its tools say.
    ``agent``: the import path of the agent (Agents SDK, pydantic-ai) the child runs (strategy ``agent``,
    its ``options`` saying which of that agent's ``as_tool`` agents)."""

    task: str
    role: str = "agent"
    instructions: str = ""
    tools: list[str] | None = None
    strategy: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    fraction: float | None = None  # share of the parent's budget; None: the job's child_fraction
    timeout: float | None = None  # seconds; its deadline is the earlier of its parent's and now + this
    key: str | None = None  # the strategy's own name for it, handed back in ``ChildResults.keys``
    max_cycles: int | None = None  # model calls it may make on its own, never more than its parent's
    can_spawn: bool = True
    agent: str | None = None


# --- Actions -----------------------------------------------------------------


@dataclass(frozen=True)
class CallModel:
    """One model call. ``tools`` narrows what is offered (None: every tool the
    agent may use; []: none). ``schema`` asks for a JSON answer matching that JSON
    Schema: the reply's ``parsed`` holds it, and a reply that does not match fails
    the agent before the strategy sees it. ``schema_name`` names that schema to
    the model (letters, digits, _ and -).

    ``functions`` are function schemas offered beside those tools, of tools the
    strategy brings itself (an Agents SDK agent's tools and handoffs, a pydantic-ai agent's): its
    ``RunTools`` runs them through the tool policy like any tool. ``key`` is the
    strategy's digest of the request: a step replayed from the call's record made
    under another key ends the agent ``nondeterministic`` instead of using it."""

    state: BaseModel
    messages: list[dict[str, Any]]
    tools: list[str] | None = None
    schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    functions: list[dict[str, Any]] = field(default_factory=list)
    key: str | None = None


@dataclass(frozen=True)
class RunTools:
    state: BaseModel
    calls: list[ToolCall]


@dataclass(frozen=True)
class Spawn:
    """Open ``children``. ``join="all"`` resumes the strategy once, when every one
    has finished, with their results in the order asked. ``join="each"`` resumes it
    as they finish, with those done since its last resume (one, or a batch of those
    that finished while it ran); it may then call the model, run tools or spawn
    more while the others run, and a ``Spawn(join="each")`` with no children waits
    for the next. An agent that finishes while such children run cancels them."""

    state: BaseModel
    children: list[ChildRequest]
    join: Literal["all", "each"] = "all"


@dataclass(frozen=True)
class Cancel:
    """Stop children this agent spawned (``join="each"``) and still runs: each ends
    ``cancelled`` at its next step, and comes back in a later ``ChildResults`` like
    any child. Ids of other agents are ignored. Then it waits like an empty ``Spawn``."""

    state: BaseModel
    agent_ids: list[str]


@dataclass(frozen=True)
class Finish:
    state: BaseModel
    status: AgentStatus
    output: str | None = None
    error: str | None = None
    data: Any = None  # a JSON value the parent reads as is, never scraped out of prose
    cause: Cause | None = None  # of a failure; None: the worker takes it from the status


Action = CallModel | RunTools | Spawn | Cancel | Finish


# --- Outcomes ----------------------------------------------------------------


@dataclass(frozen=True)
class ToolResults:
    """Each call's text by call id; ``ran``: when each call the worker ran in this
    step started and ended (none for a call answered without running, or replayed
    from an earlier run of the step); ``shown``: the user message showing the
    images the calls returned (a tool message holds text alone), None for none."""

    results: dict[str, str]  # tool call id -> text the model sees
    ran: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)
    shown: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChildResults:
    """Finished children's results; ``keys[i]`` is the ``key`` ``results[i]`` was
    asked with. ``running`` maps the agent id of every child still running (a
    ``join="each"`` spawn's) to its key: what ``Cancel`` names."""

    results: list[AgentResult]
    keys: list[str | None] = field(default_factory=list)
    running: dict[str, str | None] = field(default_factory=dict)


Outcome = ModelReply | ToolResults | ChildResults


_ACTIONS = {cls.__name__: cls for cls in (CallModel, RunTools, Spawn, Cancel, Finish)}


def to_json(action: Action) -> dict[str, Any]:
    """An Action as JSON, to checkpoint an agent that pauses before taking it. Its
    state is left out: the checkpoint holds it already, as the agent's state."""
    data = asdict(action)
    del data["state"]
    return {"type": type(action).__name__, **data}


def from_json(data: dict[str, Any], state: BaseModel) -> Action:
    """The Action ``to_json`` wrote, carrying ``state`` again."""
    fields = dict(data)
    cls = _ACTIONS[fields.pop("type")]
    if cls is RunTools:
        fields["calls"] = [ToolCall(**c) for c in fields["calls"]]
    elif cls is Spawn:
        fields["children"] = [ChildRequest(**c) for c in fields["children"]]
    elif cls is Finish:
        fields["status"] = AgentStatus(fields["status"])
        fields["cause"] = fields.get("cause") and Cause.model_validate(fields["cause"])
    return cls(state=state, **fields)
