"""What a user submits: ``JobSpec`` (the root) and ``AgentSpec`` (any agent).

These are the wire contract of ``covey.run_job``: validated at the client and again
in the worker, so a bad spec from any Celery client is refused before anything runs.
The contract names strategies but imports none: their registry is looked up by
module name when a spec is validated, so the wire stays below the strategies.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from covey.budgets import scopes
from covey.budgets.budget import Budget, Count, Number, Seconds
from covey.config.priorities import LEAST_URGENT, MOST_URGENT
from covey.errors import CoveyError, describe
from covey.models.catalog import ModelParams
from covey.parts import MAX_PARTS, MAX_TOTAL_BYTES, Attached, File, FilePart, Image, ImagePart, Part
from covey.tools.registry import check_names

DEFAULT_MAX_CALL_TOKENS = 4096  # what current models take for one reply
# Far above any model's longest reply, and low enough that a reservation (prompt
# plus this) stays under 10^14, which the ledger's Lua writes as an exact integer.
MAX_CALL_TOKENS = 10**9
DEFAULT_APPROVAL_SECONDS = 24 * 3600.0
STRATEGIES = "covey.orchestration.registry"  # strategies by name, built-in and from entry points
AGENT_STRATEGY = "agent"  # the strategy that runs an agent of another framework (``AgentSpec.agent``)
# ``module.path:attribute``: where a worker imports an agent written with another framework from
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
AGENT_PATH = re.compile(f"{_DOTTED}:{_DOTTED}")


class InvalidSpec(CoveyError, ValueError):
    """A spec that cannot run; the message names the field at fault."""


class Said(BaseModel):
    """One message of the conversation before an agent's task."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class AgentSpec(BaseModel):
    # protected_namespaces: `model_params` is a field of ours, not pydantic's `model_` API.
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    task: str = Field(min_length=1)
    parts: list[Attached] = Field(
        default_factory=list,
        max_length=MAX_PARTS,
        description="images and files beside the task's text, as OpenAI chat content parts: a task given as a "
        "list of parts keeps its text in task and the rest here",
    )
    role: str = Field(default="agent", min_length=1, max_length=64)
    instructions: str = ""
    model: str = Field(default="sim", min_length=1)
    model_params: ModelParams = Field(
        default_factory=ModelParams,
        description="temperature, top_p, seed; over the models file's; children inherit them",
    )
    strategy: str = "react"
    options: dict[str, Any] = Field(default_factory=dict)
    agent: str | None = Field(
        default=None,
        max_length=200,
        description="an agent written with the OpenAI Agents SDK or pydantic-ai, as module.path:attribute, that "
        "the workers import and run (strategy agent): every model and tool call of it covey's",
    )
    tools: list[str] | None = Field(
        default=None,
        description="tools offered, names or patterns; unset: covey's built-ins (with `agent`: its own alone); "
        "['*']: every tool served",
    )
    deny: list[str] = Field(default_factory=list)
    max_cycles: Count = Field(default=20, ge=1, description="model calls this agent alone may make")
    max_call_tokens: int = Field(
        default=DEFAULT_MAX_CALL_TOKENS,
        ge=1,
        le=MAX_CALL_TOKENS,
        strict=True,
        description="completion cap of one model call",
    )
    timeout: Seconds | None = Field(default=None, gt=0, description="seconds this agent may run")
    max_schema_retries: int = Field(
        default=1,
        ge=0,
        le=5,
        strict=True,
        description="times an off-schema reply is asked again before the agent fails",
    )
    budget_notice: bool = Field(
        default=False,
        strict=True,
        description="each model call carries a system note of what the agent has left "
        "(tokens, cost, model calls, seconds), so the model can plan; children inherit it",
    )
    wrap_up: bool = Field(
        default=True,
        strict=True,
        description="when the budget runs out, the agent makes one last call without tools for its final answer "
        "and ends completed with cause budget and data.wrapped_up; false ends it budget_exceeded; children inherit it",
    )
    approve: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        default_factory=list,
        description="patterns of tool names (fnmatch: send_*) whose every call waits for a person's "
        "approval; children inherit them",
    )
    approval_timeout: Seconds = Field(
        default=DEFAULT_APPROVAL_SECONDS,
        gt=0,
        description="seconds a tool call waits for a decision before it counts as denied; children inherit it",
    )
    history: list[Said] = Field(
        default_factory=list,
        description="the conversation before the task, oldest first: given, or a session's turns",
    )
    session: str | None = Field(
        default=None,
        pattern=scopes.LABEL_PATTERN,
        description="a conversation kept across jobs: the root starts from its turns and adds its own; "
        "one job at a time runs on it",
    )
    guardrails: list[str] = Field(
        default_factory=list,
        description="guardrails (served by the workers) that check the job's input, each agent's answer and its "
        "tool calls; children inherit them",
    )
    stream: bool = Field(
        default=False,
        strict=True,
        description="publish the text of each model reply as it arrives (model.delta events, a few a "
        "second); children inherit it",
    )
    cache: bool = Field(
        default=False,
        strict=True,
        description="serve a model call identical to an earlier one (endpoint, messages, tools, parameters, "
        "reply cap) from covey's reply cache, charged nothing; keep this job's answers there; children inherit it",
    )

    @model_validator(mode="before")
    @classmethod
    def _task_parts(cls, data: Any) -> Any:
        """A task given as content parts (or ``Image``/``File``/str items) becomes its
        text in ``task`` and its images and files in ``parts``, checked here so a
        bad part is refused naming ``task``."""
        if not isinstance(data, dict) or not isinstance(data.get("task"), list | tuple):
            return data
        try:
            given = _PARTS.validate_python([_as_part(item) for item in data["task"]])
        except ValidationError as e:
            raise ValueError(describe(e, prefix="task")) from None
        text = "\n\n".join(p.text for p in given if p.type == "text")
        if not text.strip():
            raise ValueError("task: give it some text beside its images and files")
        attached = [p.model_dump(exclude_none=True) for p in given if p.type != "text"]
        given_parts = data.get("parts", [])
        parts = [*attached, *given_parts] if isinstance(given_parts, list) else given_parts  # pydantic says why not
        return {**data, "task": text, "parts": parts}

    @field_validator("task")
    @classmethod
    def _has_text(cls, value: str) -> str:
        return require_text(value)

    @field_validator("parts")
    @classmethod
    def _parts_fit(cls, value: list[ImagePart | FilePart]) -> list[ImagePart | FilePart]:
        """Together within ``MAX_TOTAL_BYTES``, each file at its own path."""
        files = [p.file.filename for p in value if isinstance(p, FilePart)]
        if len(set(files)) < len(files):
            raise ValueError(f"two files at one path: {sorted(f for f in files if files.count(f) > 1)[0]!r}")
        size = sum(len(p.file.file_data if isinstance(p, FilePart) else p.image_url.url) for p in value) * 3 // 4
        if size > MAX_TOTAL_BYTES:
            raise ValueError(f"images and files larger than {MAX_TOTAL_BYTES // 1024} KiB together")
        return value

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, value: str, info: ValidationInfo) -> str:
        strategies = _strategies()
        try:
            strategies.strategy(value)
        except strategies.UnknownStrategy as e:
            if not _workers_decide(info):
                raise ValueError(str(e)) from None
            if not STRATEGY_NAME.fullmatch(value):
                raise ValueError(f"strategy {value!r}: not a strategy's name") from None
        return value

    @field_validator("agent")
    @classmethod
    def _agent_path(cls, value: str | None) -> str | None:
        """The form alone: whether it imports, and is an agent, is for the client to
        check where it can and the worker to decide (``covey.agents.loading``)."""
        if value is not None and not AGENT_PATH.fullmatch(value):
            raise ValueError(f"{value!r} is not module.path:attribute (mypkg.agents:triage)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _agent_strategy(cls, data: Any) -> Any:
        """A spec naming an ``agent`` runs it: its strategy is ``agent`` unless it says otherwise."""
        if isinstance(data, dict) and data.get("agent") is not None and "strategy" not in data:
            return {**data, "strategy": AGENT_STRATEGY}
        return data

    @model_validator(mode="after")
    def _agent_and_strategy(self) -> AgentSpec:
        if (self.strategy == AGENT_STRATEGY) != (self.agent is not None):
            raise ValueError(f"agent and strategy {AGENT_STRATEGY!r} go together: give agent=module.path:attribute")
        return self

    @model_validator(mode="after")
    def _valid_options(self, info: ValidationInfo) -> AgentSpec:
        """The strategy's own Options model checks them, so a bad option is refused
        at the wire naming the field; a strategy this install lacks is the workers'
        to check (``Client.check``, against the options schema they publish)."""
        strategies = _strategies()
        try:
            options = strategies.strategy(self.strategy).Options
        except strategies.UnknownStrategy:
            return self  # let through by _known_strategy: the workers decide
        try:
            options.model_validate(self.options)
        except ValidationError as e:
            raise ValueError(describe(e, prefix="options")) from None
        return self

    @field_validator("tools", "deny")
    @classmethod
    def _tool_names(cls, value: list[str] | None) -> list[str] | None:
        """Well-formed names or patterns (``inv__*``) only: which tools exist is what the workers serve."""
        check_names(value or [], patterns=True)
        return value

    @field_validator("guardrails")
    @classmethod
    def _guardrail_names(cls, value: list[str]) -> list[str]:
        check_names(value)
        return value


class JobSpec(AgentSpec):
    """The root agent's spec plus what holds for the whole job."""

    role: str = Field(default="root", min_length=1, max_length=64)
    budget: Budget = Field(default_factory=Budget)
    tenant: str | None = Field(default=None, pattern=scopes.LABEL_PATTERN)
    sweep: str | None = Field(
        default=None, pattern=scopes.LABEL_PATTERN, description="the sweep this job belongs to: charges sweep:<id>"
    )
    child_fraction: Number = Field(default=0.5, gt=0, le=1, description="share of a budget each child asks for")
    priority: int = Field(
        default=LEAST_URGENT,
        ge=LEAST_URGENT,
        le=MOST_URGENT,
        strict=True,
        description="how soon the broker hands out the job's messages, every agent's: 9 the most urgent, "
        "0 (the default) every job's that asks for none",
    )

    @field_validator("tenant", mode="before")
    @classmethod
    def _bare_tenant(cls, value: Any) -> Any:
        """The scope is ``tenant:<name>``; the field is the name alone, and a pattern would not say so."""
        if isinstance(value, str) and value.startswith(scopes.TENANT + ":"):
            raise ValueError(f"give the name without its prefix: {value.removeprefix(scopes.TENANT + ':')!r}")
        return value

    @classmethod
    def parse(cls, data: Any, workers_decide: bool = False) -> JobSpec:
        """Validate wire data, raising ``InvalidSpec`` with one line per bad field.
        ``workers_decide``: a strategy this install lacks is let through, for the
        submitter to check against what the workers publish (a worker never does)."""
        try:
            return cls.model_validate(data, context={WORKERS_DECIDE: True} if workers_decide else None)
        except ValidationError as e:
            raise InvalidSpec("invalid job spec: " + describe(e)) from e

    def with_defaults(self, model: str, budget: Budget) -> JobSpec:
        """The spec with every field its submitter left unset taken from the
        deployment's defaults (``COVEY_MODEL``, ``COVEY_MAX_*``); a cap set to
        ``null`` on purpose stays unlimited."""
        caps = budget.model_dump()
        if "budget" in self.model_fields_set:
            caps.update(self.budget.model_dump(include=self.budget.model_fields_set))
        update: dict[str, Any] = {"budget": Budget(**caps)}
        if "model" not in self.model_fields_set:
            update["model"] = model
        return self.model_copy(update=update)

    def wire(self) -> dict[str, Any]:
        """The JSON sent to ``covey.run_job``: only what was set, so the worker's
        defaults fill the rest."""
        return self.model_dump(mode="json", exclude_unset=True)

    def scopes(self) -> list[str]:
        """Global ledger scopes this job is charged to."""
        return scopes.of_job(self.tenant, self.sweep)


def require_text(value: str) -> str:
    """A blank task would run, and cost, a job that can answer nothing."""
    if not value.strip():
        raise ValueError("only whitespace: give the task some text (beside any images and files)")
    return value


_PARTS: TypeAdapter[list[Part]] = TypeAdapter(list[Part])


def _as_part(item: Any) -> Any:
    """A task's list item as a part's JSON: a str is a text part, an ``Image`` or ``File`` its own."""
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, Image | File):
        return item.part()
    return item


WORKERS_DECIDE = "workers_decide"
STRATEGY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")  # an entry point's name, as a plugin registers it


def _workers_decide(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get(WORKERS_DECIDE))


def _strategies() -> ModuleType:
    return importlib.import_module(STRATEGIES)
