"""The plan DAG of plan_execute: steps, their validation, ready steps, references.

Pure code over plain data. A planner's plan is checked here before anything runs,
so a bad plan costs one more planner call instead of a broken execution: every
refusal is a ``PlanError`` whose message names the offending step ids, and that
message is what the planner reads when asked again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from covey.errors import CoveyError

ROLE_CHARS = 64  # an agent's role name is at most this long (AgentSpec.role)
DESCRIPTION_CHARS = 200  # a step's description: the instructions of the agent that runs it
INPUT_CHARS = 1000  # a step's input: an agent's task or a tool's input (a result comes as {{id.result}})
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# ``{{step_1.result}}``: the result of an earlier step, spliced into a step's input.
_REFERENCE = re.compile(r"\{\{\s*([A-Za-z0-9_-]+)\.result\s*\}\}")


class PlanError(CoveyError, ValueError):
    """A plan that cannot run; the message names the steps at fault."""


class TooManySteps(PlanError):
    pass


class EmptyPlan(PlanError):
    pass


class DuplicateStep(PlanError):
    pass


class BadStep(PlanError):
    """A step that names both or neither of a role and a tool, or a tool it may not use."""


class UnknownDependency(PlanError):
    pass


class PlanCycle(PlanError):
    pass


class UnknownReference(PlanError):
    """A ``{{id.result}}`` naming a step whose result the step cannot have."""


class Step(BaseModel):
    """One step: an agent of ``role`` given ``input`` as its task, or ``tool`` run on ``input``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    description: str = ""
    role: str | None = None
    tool: str | None = None
    input: str = ""
    depends_on: tuple[str, ...] = Field(default_factory=tuple)

    @field_validator("role", "tool")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return (value.strip() or None) if value is not None else None

    @field_validator("role")
    @classmethod
    def _short_role(cls, value: str | None) -> str | None:
        return value[:ROLE_CHARS] if value is not None else None


@dataclass(frozen=True)
class Limits:
    """What a plan may use: how many steps, which tools, and whether agent steps can spawn."""

    max_steps: int
    tools: frozenset[str]
    agents: bool = True


_ROLE = {"type": "string", "minLength": 1, "maxLength": ROLE_CHARS, "description": "the agent role that runs this step"}
_TOOL = {"type": "string", "description": "the tool that runs this step directly"}


def schema(limits: Limits, completed: Iterable[str] = ()) -> dict[str, Any]:
    """The JSON schema a plan is asked in: ``validate``'s rules where a schema can say
    them, so an endpoint that holds its reply to the schema (strict mode, a grammar)
    never writes a step that names both or neither of a role and a tool, a tool it
    may not use, more than ``limits.max_steps`` steps, or a string without end. What
    a schema cannot say (dependencies on steps that exist, no cycles) ``validate`` refuses."""
    done = list(completed)
    dependencies = limits.max_steps - 1 + len(done)  # every other step of the plan, and every completed one
    null = {"type": "null"}
    forms = [_step(dependencies, _ROLE, null, task=True)] if limits.agents else []
    if limits.tools or not forms:  # with neither, no plan can run, and ``validate`` says why
        tool = {**_TOOL, "enum": sorted(limits.tools)} if limits.tools else null
        forms.append(_step(dependencies, null, tool, task=False))
    steps: dict[str, Any] = {
        "type": "array",
        "items": forms[0] if len(forms) == 1 else {"anyOf": forms},
        "maxItems": limits.max_steps,
    }
    if not done:
        steps["minItems"] = 1
    return {"type": "object", "properties": {"steps": steps}, "required": ["steps"], "additionalProperties": False}


def _step(dependencies: int, role: dict[str, Any], tool: dict[str, Any], task: bool) -> dict[str, Any]:
    """One kind of step: an agent's (a role, a null tool, its task as the input: never
    empty) or a tool's (a null role, a tool, whatever input the tool takes)."""
    step_id = {"type": "string", "pattern": ID_PATTERN}
    text = {"type": "string", "minLength": 1} if task else {"type": "string"}
    properties = {
        "id": step_id,
        "description": {"type": "string", "maxLength": DESCRIPTION_CHARS},
        "role": role,
        "tool": tool,
        "input": text | {"maxLength": INPUT_CHARS, "description": "the agent's task or the tool's input"},
        "depends_on": {"type": "array", "items": step_id, "maxItems": dependencies},
    }
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def validate(raw: Iterable[Mapping[str, object]], limits: Limits, completed: Iterable[str] = ()) -> list[Step]:
    """The plan's steps, or the first ``PlanError`` found.

    ``completed`` are ids of steps done under an earlier plan: a step may depend on
    and reference them, and may not reuse their ids. An empty plan is accepted only
    when something is completed (a replan saying nothing is left to do).
    """
    steps = [Step.model_validate(item) for item in raw]
    done = set(completed)
    if len(steps) > limits.max_steps:
        raise TooManySteps(f"the plan has {len(steps)} steps, more than max_steps={limits.max_steps}")
    if not steps and not done:
        raise EmptyPlan("the plan has no steps")
    _check_ids(steps, done)
    for step in steps:
        _check_kind(step, limits)
    _check_dependencies(steps, done)
    _check_cycles(steps)
    _check_references(steps, done)
    return steps


def _check_ids(steps: list[Step], done: set[str]) -> None:
    seen: set[str] = set()
    for step in steps:
        if step.id in done:
            raise DuplicateStep(f"duplicate step id {step.id}: a completed step has it")
        if step.id in seen:
            raise DuplicateStep(f"duplicate step id {step.id}")
        seen.add(step.id)


def _check_kind(step: Step, limits: Limits) -> None:
    if (step.role is None) == (step.tool is None):
        raise BadStep(f"step {step.id} must name exactly one of a role and a tool")
    if step.tool is not None and step.tool not in limits.tools:
        usable = ", ".join(sorted(limits.tools)) or "none"
        raise BadStep(f"step {step.id} uses tool {step.tool!r}, which this agent may not use (usable: {usable})")
    if step.role is not None and not limits.agents:
        raise BadStep(f"step {step.id} needs an agent, but this agent may not spawn (depth cap): use tools")


def _check_dependencies(steps: list[Step], done: set[str]) -> None:
    known = done | {s.id for s in steps}
    for step in steps:
        for dep in step.depends_on:
            if dep not in known:
                raise UnknownDependency(f"step {step.id} depends on unknown step {dep}")


def _check_cycles(steps: list[Step]) -> None:
    """Depth-first search over the plan's own edges; the first back edge found
    is reported as the path it closes (``cycle: a -> b -> a``)."""
    edges = {s.id: s.depends_on for s in steps}
    state: dict[str, str] = {}  # id -> "open" while on the path, "closed" once explored
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for dep in edges.get(node, []):
            if state.get(dep) == "open":
                loop = path[path.index(dep) :] + [dep]
                raise PlanCycle("cycle: " + " -> ".join(loop))
            if dep in edges and dep not in state:
                visit(dep)
        path.pop()
        state[node] = "closed"

    for step in steps:
        if step.id not in state:
            visit(step.id)


def _check_references(steps: list[Step], done: set[str]) -> None:
    """A step may reference a completed step or one it depends on, directly or not:
    only those results exist by the time it runs."""
    by_id = {s.id: s for s in steps}
    for step in steps:
        reachable = _ancestors(step, by_id) | done
        for ref in references(step.input):
            if ref not in by_id and ref not in done:
                raise UnknownReference(f"step {step.id} references unknown step {ref}")
            if ref not in reachable:
                raise UnknownReference(f"step {step.id} references {ref}, which it does not depend on")


def _ancestors(step: Step, by_id: Mapping[str, Step]) -> set[str]:
    found: set[str] = set()
    todo = list(step.depends_on)
    while todo:
        dep = todo.pop()
        if dep not in found:
            found.add(dep)
            todo.extend(by_id[dep].depends_on if dep in by_id else ())
    return found


def references(text: str) -> list[str]:
    """Ids referenced as ``{{id.result}}`` in ``text``, in order."""
    return _REFERENCE.findall(text)


def resolve(text: str, results: Mapping[str, str], escape: Callable[[str], str] = str) -> str:
    """``text`` with every ``{{id.result}}`` replaced by that step's result, passed
    through ``escape`` (``json_escaped`` where ``text`` is JSON).

    Raises ``UnknownReference`` naming the first id without a result."""
    missing = [ref for ref in references(text) if ref not in results]
    if missing:
        raise UnknownReference(f"reference to {missing[0]}, which has no result")
    return _REFERENCE.sub(lambda m: escape(results[m.group(1)]), text)


def json_escaped(text: str) -> str:
    """``text`` as it goes inside a JSON string: a quote or newline in a result
    cannot end the string it is spliced into."""
    return json.dumps(text)[1:-1]


def ready(steps: Iterable[Step], done: Iterable[str]) -> list[Step]:
    """Steps not done whose dependencies all are: the next wave, in plan order."""
    finished = set(done)
    return [s for s in steps if s.id not in finished and all(d in finished for d in s.depends_on)]
