"""A grid file (TOML or YAML) and the configurations it spans.

::

    models = ["sim"]                       # default: the worker's COVEY_MODEL
    strategies = ["react", {name = "single", label = "one-shot"}]
    agents = ["mypkg.agents:triage", {path = "mypkg.agents:v2", label = "v2"}]   # optional
    budgets = [{max_tokens = 4000, max_cycles = 4, seconds = 60, label = "small"}]
    model_params = {temperature = 0.2}     # optional: every job's model_params
    cache = true                           # optional: identical model calls answered from the reply cache
    priority = 2                           # optional: every job's priority (0-9, 9 the most urgent)
    repeats = 1
    scorer = "numeric"                     # or {kind = "numeric", tolerance = 0.01}, or a list of them

Every model x strategy (or agent) x budget is one configuration; an agent is an
Agents SDK or pydantic-ai agent by its import path (``covey.agents``), run under
the ``agent`` strategy, so a team compares its own agents beside covey's
strategies (a grid naming agents alone runs no strategy); every sample x
configuration x repeat is one covey job. A budget here is per sample (the job's
own caps); the sweep's total cap is given when the sweep runs. The grid is fully
checked when loaded, each strategy's options by the strategy itself, so a bad
field is named before anything is enqueued.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from datetime import datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from covey import inputs
from covey.config.priorities import LEAST_URGENT, MOST_URGENT
from covey.errors import describe
from covey.spec import AGENT_STRATEGY, InvalidSpec, JobSpec
from covey.sweeps.dataset import Sample
from covey.sweeps.errors import SweepInputError
from covey.sweeps.scorers import ScorerSpec, Scoring

MAX_REPEATS = 1000  # runs of one sample in one configuration (the grid's repeats, --epochs)


class Limits(BaseModel):
    """One sample's caps: the job's budget, its per-call reply cap and its seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, ge=1)
    max_cycles: int | None = Field(default=None, ge=1)
    max_agents: int | None = Field(default=None, ge=0)
    max_depth: int | None = Field(default=None, ge=0)
    max_call_tokens: int | None = Field(default=None, ge=1)
    seconds: float | None = Field(default=None, gt=0)
    label: str | None = Field(default=None, min_length=1, max_length=40)  # names it; no part of the job

    def caps(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude={"label"})


# How a budget's name abbreviates each cap, so names stay short enough for a table.
SHORT = {
    "max_tokens": "tok",
    "max_cycles": "cyc",
    "max_agents": "agents",
    "max_depth": "depth",
    "max_call_tokens": "call",
    "seconds": "s",
}


class StrategyEntry(BaseModel):
    """A strategy of the grid, or an agent (``agent``: its import path; its strategy ``agent``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    label: str | None = Field(default=None, min_length=1, max_length=40)
    agent: str | None = None

    @property
    def short(self) -> str:
        """What names it in a configuration's name: the strategy, or the agent's attribute."""
        return self.agent.rpartition(":")[2] if self.agent else self.name


class AgentEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)
    label: str | None = Field(default=None, min_length=1, max_length=40)


class GridFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[str | None] = Field(default=[None], min_length=1)  # pydantic copies a mutable default
    strategies: list[StrategyEntry] = Field(default_factory=lambda: [StrategyEntry(name="react")])
    budgets: list[Limits] = Field(default_factory=lambda: [Limits()], min_length=1)
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS)
    scorer: list[ScorerSpec] = Field(default_factory=lambda: [ScorerSpec()], min_length=1)
    instructions: str = ""
    model_params: dict[str, Any] = Field(default_factory=dict)
    cache: bool = False  # every job's model calls served from, and kept in, the reply cache
    priority: int = Field(default=LEAST_URGENT, ge=LEAST_URGENT, le=MOST_URGENT, strict=True)  # every job's
    agents: list[AgentEntry] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _agents_alone(cls, value: Any) -> Any:
        """A grid naming agents and no strategy runs the agents alone."""
        if isinstance(value, dict) and value.get("agents") and "strategies" not in value:
            return {**value, "strategies": []}
        return value

    @field_validator("agents", mode="before")
    @classmethod
    def _paths_are_entries(cls, value: Any) -> Any:
        """``"mypkg:a"`` is short for ``{path = "mypkg:a"}``."""
        return [{"path": v} if isinstance(v, str) else v for v in value] if isinstance(value, list) else value

    @property
    def entries(self) -> list[StrategyEntry]:
        """Its strategies, then its agents as entries of the ``agent`` strategy."""
        agents = [
            StrategyEntry(name=AGENT_STRATEGY, options=a.options, label=a.label, agent=a.path) for a in self.agents
        ]
        return [*self.strategies, *agents]

    @field_validator("strategies", mode="before")
    @classmethod
    def _names_are_entries(cls, value: Any) -> Any:
        """``"react"`` is short for ``{name = "react"}``."""
        return [{"name": v} if isinstance(v, str) else v for v in value] if isinstance(value, list) else value

    @field_validator("scorer", mode="before")
    @classmethod
    def _kinds_are_specs(cls, value: Any) -> Any:
        """``"numeric"`` is short for ``[{kind = "numeric"}]``; one scorer needs no list."""
        listed = value if isinstance(value, list) else [value]
        return [{"kind": v} if isinstance(v, str) else v for v in listed]


class Config(BaseModel):
    """One configuration of the grid: what every one of its jobs shares."""

    model_config = ConfigDict(frozen=True)

    name: str
    model: str | None
    strategy: str
    options: dict[str, Any]
    limits: Limits
    instructions: str = ""
    model_params: dict[str, Any] = Field(default_factory=dict)
    cache: bool = False  # how its calls are answered, not what they ask: no part of its key
    priority: int = LEAST_URGENT  # when its jobs run, not what they ask: no part of its key either
    agent: str | None = None  # an agent's import path (strategy ``agent``)

    @cached_property  # frozen: computed once, not for each of its units' every lookup
    def key(self) -> str:
        """Stable across runs and machines: resume and claims find a unit by it.
        Names and labels are left out, so renaming a configuration keeps its results."""
        body = self.model_dump(
            mode="json", exclude={"name": True, "cache": True, "priority": True, "limits": {"label"}}
        )
        if not self.model_params:  # a grid without model_params keeps the keys it had before they existed
            del body["model_params"]
        if self.agent is None:  # and one without agents the keys it had before them
            del body["agent"]
        return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]

    def spec(self, sample: Sample, sweep_id: str, now: datetime) -> JobSpec:
        """The job for one sample; ``seconds`` becomes a deadline from ``now``."""
        budget = {k: v for k, v in self.limits.caps().items() if k not in ("seconds", "max_call_tokens")}
        if self.limits.seconds is not None:
            budget["deadline"] = now + timedelta(seconds=self.limits.seconds)
        fields: dict[str, Any] = {
            "task": sample.input,
            "strategy": self.strategy,
            "options": self.options,
            "budget": budget,
            "sweep": sweep_id,
        }
        if self.model is not None:
            fields["model"] = self.model
        if self.limits.max_call_tokens is not None:
            fields["max_call_tokens"] = self.limits.max_call_tokens
        if self.instructions:
            fields["instructions"] = self.instructions
        if self.model_params:
            fields["model_params"] = self.model_params
        if self.cache:
            fields["cache"] = True
        if self.priority != LEAST_URGENT:
            fields["priority"] = self.priority
        if self.agent is not None:
            fields["agent"] = self.agent
        # A strategy this machine lacks is checked against the workers' catalog (covey.sweeps.served).
        return JobSpec.parse(fields, workers_decide=True)


class Grid(BaseModel):
    configs: list[Config]
    repeats: int
    scorers: list[ScorerSpec]

    def as_run(self) -> dict[str, Any]:
        """What ``sweep.json`` records: every configuration with its key, the repeats, the scorers."""
        return {
            "configurations": [
                {**c.model_dump(mode="json", exclude_defaults=True), "key": c.key} for c in self.configs
            ],
            "repeats": self.repeats,
            "scorers": [s.model_dump(mode="json", exclude_defaults=True) for s in self.scorers],
        }

    def repeated(self, epochs: int | None) -> Grid:
        """This grid with each sample run ``epochs`` times (``covey sweep --epochs``), or as
        it is for None; ``SweepInputError`` past ``MAX_REPEATS``, as a grid's repeats."""
        if epochs is not None and not 1 <= epochs <= MAX_REPEATS:
            raise SweepInputError(f"--epochs {epochs}: give 1 to {MAX_REPEATS} runs of each sample")
        return self if epochs is None else self.model_copy(update={"repeats": epochs})

    @property
    def digest(self) -> str:
        """What makes two grids the same sweep: their configurations' keys, repeats and
        scorers (names and labels left out, as in ``Config.key``)."""
        body = {
            "keys": sorted(c.key for c in self.configs),
            "repeats": self.repeats,
            "scorers": [s.model_dump(mode="json", exclude={"name"}) for s in self.scorers],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def load_grid(path: str | Path) -> Grid:
    """The grid in ``path`` (``.toml``, ``.yaml``/``.yml``), checked in full."""
    path = Path(path)
    if not path.is_file():
        raise SweepInputError(f"grid {path}: no such file")
    raw = _read(path)
    if not raw:
        raise SweepInputError(f"{path.name}: empty grid: give at least strategies (or models, budgets, scorer)")
    try:
        grid = GridFile.model_validate(raw)
    except ValidationError as e:
        raise SweepInputError(f"{path.name}: {describe(e)}") from None
    try:
        Scoring.build(grid.scorer)
    except ValueError as e:
        raise SweepInputError(f"{path.name}: scorer: {e}") from None
    return Grid(configs=_configs(path.name, grid), repeats=grid.repeats, scorers=grid.scorer)


def _read(path: Path) -> Any:
    try:
        text = inputs.read_text(path, path.name, inputs.MAX_CONFIG_BYTES)
    except inputs.Unreadable as e:
        raise SweepInputError(str(e)) from None
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise SweepInputError(f"{path.name}: not valid TOML: {e}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise SweepInputError(f"{path.name}{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
        return {} if data is None else data
    raise SweepInputError(f"grid {path.name}: name a .toml, .yaml or .yml file")


def _configs(filename: str, grid: GridFile) -> list[Config]:
    entries = grid.entries
    if not entries:
        raise SweepInputError(f"{filename}: strategies: give at least one strategy or agent")
    labels = _strategy_labels(entries)
    budget_names = _budget_names(grid.budgets)
    configs = []
    for model, (si, entry), (bi, budget) in itertools.product(grid.models, enumerate(entries), enumerate(grid.budgets)):
        parts = [model or "default", labels[si]] + ([budget_names[bi]] if len(grid.budgets) > 1 else [])
        config = Config(
            name="/".join(parts),
            model=model,
            strategy=entry.name,
            options=entry.options,
            limits=budget,
            instructions=grid.instructions,
            model_params=grid.model_params,
            cache=grid.cache,
            priority=grid.priority,
            agent=entry.agent,
        )
        try:  # the wire's own checks: strategy name, its options, model name
            config.spec(Sample(id="check", input="check"), "check", datetime.now().astimezone())
        except InvalidSpec as e:
            where = str(e).removeprefix("invalid job spec: ")
            raise SweepInputError(f"{filename}: configuration {config.name}: {where}") from None
        configs.append(config)
    first: dict[str, str] = {}
    for c in configs:
        if c.key in first:
            raise SweepInputError(
                f"{filename}: configuration {c.name} is the same as {first[c.key]}; use repeats to run one twice"
            )
        first[c.key] = c.name
    if len({c.name for c in configs}) != len(configs):
        raise SweepInputError(
            f"{filename}: two configurations share a name; give each strategy and budget a distinct label"
        )
    return configs


def _budget_names(budgets: list[Limits]) -> list[str]:
    """Each budget's label, else the caps in which the grid's budgets differ, abbreviated:
    ``tok=20k,cyc=6``, never the whole budget."""
    caps = [b.caps() for b in budgets]
    varying = [k for k in SHORT if len({c.get(k) for c in caps}) > 1]
    return [
        b.label or ",".join(f"{SHORT[k]}={_short(c[k])}" for k in varying if k in c) or "defaults"
        for b, c in zip(budgets, caps)
    ]


def _short(value: float) -> str:
    """``20000`` as ``20k``, ``1500000`` as ``1.5M``, ``120.0`` as ``120``."""
    for scale, suffix in ((1_000_000, "M"), (1_000, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _strategy_labels(entries: list[StrategyEntry]) -> list[str]:
    """Each entry's label: its own, else its name, numbered when a name repeats."""
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.short] = counts.get(e.short, 0) + 1
    seen: dict[str, int] = {}
    labels = []
    for e in entries:
        seen[e.short] = seen.get(e.short, 0) + 1
        labels.append(e.label or (e.short if counts[e.short] == 1 else f"{e.short}#{seen[e.short]}"))
    return labels
