"""The sim's answers to the plan_execute strategy's structured calls, by schema name.

``plan`` answers with a deterministic plan:

- on a task asking "What is A op B?": ``step_1`` runs the ``calculator`` tool on
  "A op B"; ``step_2`` is an agent of role ``checker`` whose input is
  "Check that {{step_1.result}} answers: What is A op B?", depending on ``step_1``
  (its child computes the question again with the calculator and answers the number);
- on any other task: ``step_1``, an agent of role ``worker`` given the task itself.

``[sim:plan ARG]`` in the task scripts the first plan, the call whose last user
message is still the task (every replan adds a user message after it). ARG is one of:

- ``cycle``: the first plan has each of its first two steps depend on the other
  (for a one-step plan, the step on itself), so it is refused; the replan is the
  usual plan.
- ``fail``: the first plan's agent steps carry ``[sim:fail 500]`` in their input, so
  their children fail; the replan, which sees the failure, is the usual plan's
  agent steps alone (its tool steps completed and are not planned again).
- ``write``: the plan is one ``write_file`` step whose input is JSON but not an
  object (``["notes.md", "<the task>"]``), as a model may write it, so the step
  fails with the tool's error; the replan is the usual plan.
- ``race``: every plan is three ``worker`` steps: ``slow`` (its input carries
  ``[sim:latency 1500]``), ``fast``, and ``after_fast``, which depends on ``fast``
  alone: it starts while ``slow`` still runs.

Nothing (``[sim:plan]``) is the usual plan. Any other ARG raises ``DirectiveError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from covey.models.sim.directives import DirectiveError
from covey.models.sim.scripted.prompt import Prompt

SCENARIOS = frozenset({"", "cycle", "fail", "write", "race"})
SLOW = "[sim:latency 1500]"
FAIL = "[sim:fail 500]"


def plan(prompt: Prompt) -> dict[str, Any]:
    scenario = prompt.directives.scripted.get("plan", "")
    if scenario not in SCENARIOS:
        raise DirectiveError(f"[sim:plan {scenario}]: expected cycle, fail, write, race or nothing")
    if scenario == "race":
        return {"steps": _race()}
    steps = _usual(prompt)
    first = prompt.last == prompt.task
    if scenario == "write" and first:
        return {"steps": [_step("notes", "keep notes", json.dumps(["notes.md", prompt.task]), tool="write_file")]}
    if scenario == "cycle" and first:
        return {"steps": _cycled(steps)}
    if scenario == "fail" and first:
        return {"steps": [_failing(s) if s["role"] else s for s in steps]}
    if scenario == "fail":
        return {"steps": [s for s in steps if s["role"]]}
    return {"steps": steps}


def _usual(prompt: Prompt) -> list[dict[str, Any]]:
    expression = prompt.directives.expression
    if expression is None:
        return [_step("step_1", "do the task", prompt.task, role="worker")]
    return [
        _step("step_1", "compute the expression", expression, tool="calculator"),
        _step(
            "step_2",
            "check the result",
            f"Check that {{{{step_1.result}}}} answers: What is {expression}?",
            role="checker",
            depends_on=["step_1"],
        ),
    ]


def _race() -> list[dict[str, Any]]:
    return [
        _step("slow", "the slow part", f"{SLOW} the slow part", role="worker"),
        _step("fast", "the fast part", "the fast part", role="worker"),
        _step(
            "after_fast", "go on from the fast part", "go on from {{fast.result}}", role="worker", depends_on=["fast"]
        ),
    ]


def _cycled(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps with the first two depending on each other (one step: on itself)."""
    head, *rest = steps
    if not rest:
        return [{**head, "depends_on": [head["id"]]}]
    return [{**head, "depends_on": [rest[0]["id"]]}, {**rest[0], "depends_on": [head["id"]]}, *rest[1:]]


def _failing(step: dict[str, Any]) -> dict[str, Any]:
    return {**step, "input": f"{step['input']} {FAIL}"}


def _step(
    step_id: str,
    description: str,
    text: str,
    *,
    role: str | None = None,
    tool: str | None = None,
    depends_on: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "id": step_id,
        "description": description,
        "role": role,
        "tool": tool,
        "input": text,
        "depends_on": depends_on or [],
    }


SCRIPTS: dict[str, Callable[[Prompt], Any]] = {"plan": plan}
