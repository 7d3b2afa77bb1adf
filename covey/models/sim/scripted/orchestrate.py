"""The sim's answers to the orchestrate strategy's structured calls, by schema name.

``assignments`` reads the roster line of the planning prompt and assigns two
analysis specialists (those with a calculator first when the task is arithmetic),
the first write specialist and the first qa specialist, capped at the schema's
``maxItems``. Each task
carries the original task text, directives included, so an analysis specialist
computes "What is A op B?" with its calculator; the write step's task adds
``[sim:write orchestrate/answer.md]`` so it writes its task (analysis reports
included) with ``write_file``.

``decision`` reads the reports line of the decision prompt: the answer is the
number most completed reports give (the first on a tie), else the plain answer
the sim would give the task itself, and the rationale says which it was.

``qa_verdict`` (a qa specialist, after its calculator call) passes.

``[sim:orchestrate pick=A,B fail=C qa_fail=K]`` in the orchestrator's task steers
the plan: ``pick`` assigns exactly the named specialists in that order; ``fail``
adds ``[sim:fail 500]`` to the named specialists' tasks, so their first call
fails; ``qa_fail=K`` makes every qa verdict of rounds 1..K fail (the qa task says
its round, ``QA round R``), so the work goes round again. Any key may be left
out; an unknown key or name is a ``DirectiveError``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from covey.models.sim.directives import DirectiveError
from covey.models.sim.scripted.prompt import Prompt
from covey.models.sim.structured import instance

# The schema names and prompt labels the orchestrate strategy writes. The sim plays
# the model's side, so it reads them as a model would, without importing the
# strategy (models sit below orchestration); a test checks the two agree.
ASSIGNMENTS = "assignments"
DECISION = "decision"
ROSTER_LABEL = "Specialists: "
REPORTS_LABEL = "Reports: "
ANALYSTS = 2  # analysis specialists assigned when the directive picks none
WRITE_PATH = "orchestrate/answer.md"
UNANSWERED = "no specialist reported a number; answered the task directly"
QA_VERDICT = "qa_verdict"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_QA_ROUND = re.compile(r"QA round (\d+)")
_KEYS = frozenset({"pick", "fail", "qa_fail"})


def assignments(prompt: Prompt) -> dict[str, Any]:
    roster = _labelled(prompt.last, ROSTER_LABEL)
    if roster is None:  # not the orchestrator's planning prompt: answer like any schema
        return instance(prompt.schema, prompt.answers)
    steer = _steering(prompt.directives.scripted.get("orchestrate"))
    by_name = {s["name"]: s for s in roster}
    unknown = [n for n in [*steer["pick"], *steer["fail"]] if n not in by_name]
    if unknown:
        raise DirectiveError(f"[sim:orchestrate]: no specialist named {', '.join(unknown)}")
    chosen = [by_name[n] for n in steer["pick"]] or _default_pick(roster, prompt.answers.number is not None)
    chosen = chosen[: _max_items(prompt.schema) or len(chosen)]
    idle = [n for n in steer["fail"] if n not in {s["name"] for s in chosen}]
    if idle:
        raise DirectiveError(f"[sim:orchestrate]: fail= names unassigned specialists {', '.join(idle)}")
    return {
        "assignments": [
            {"specialist": s["name"], "task": _task(s, prompt.task, s["name"] in steer["fail"])} for s in chosen
        ]
    }


def decision(prompt: Prompt) -> dict[str, Any]:
    reports = _labelled(prompt.last, REPORTS_LABEL) or []
    numbers = {
        r["specialist"]: r["report"].strip()
        for r in reports
        if r.get("status") == "completed" and _NUMBER.fullmatch(str(r.get("report", "")).strip())
    }
    if not numbers:
        return {"answer": prompt.answers.text, "rationale": UNANSWERED}
    answer = Counter(numbers.values()).most_common(1)[0][0]
    agreeing = [name for name, number in numbers.items() if number == answer]
    return {"answer": answer, "rationale": f"{', '.join(agreeing)} reported {answer}"}


def qa_verdict(prompt: Prompt) -> dict[str, Any]:
    """Passes, unless ``qa_fail=K`` and this is round K or before."""
    fail_until = _steering(prompt.directives.scripted.get("orchestrate"))["qa_fail"]
    found = _QA_ROUND.search(prompt.task)
    round_ = int(found[1]) if found else 1
    if fail_until and round_ <= int(fail_until[0]):
        return {"passed": False, "findings": f"round {round_}: the written result was not checked against the task"}
    return {"passed": True, "findings": f"round {round_}: the written result matches {prompt.answers.text}"}


def _steering(raw: str | None) -> dict[str, list[str]]:
    """``pick=A,B fail=C qa_fail=1`` as {"pick": [A, B], "fail": [C], "qa_fail": ["1"]}."""
    steer: dict[str, list[str]] = {"pick": [], "fail": [], "qa_fail": []}
    for item in (raw or "").split():
        key, sep, value = item.partition("=")
        if key not in _KEYS or not sep or not value or (key == "qa_fail" and not value.isdigit()):
            raise DirectiveError(
                f"[sim:orchestrate {raw}]: expected pick=NAME,..., fail=NAME,... and/or qa_fail=K, got {item!r}"
            )
        steer[key] = [name for name in value.split(",") if name]
    return steer


def _default_pick(roster: list[dict[str, Any]], arithmetic: bool) -> list[dict[str, Any]]:
    analysts = [s for s in roster if s.get("kind") == "analysis"]
    if arithmetic:  # stable: keeps the roster's order among equals
        analysts.sort(key=lambda s: "calculator" not in (s.get("tools") or []))
    writers = [s for s in roster if s.get("kind") == "write"]
    checkers = [s for s in roster if s.get("kind") == "qa"]
    return analysts[:ANALYSTS] + writers[:1] + checkers[:1]


def _task(specialist: dict[str, Any], task: str, fail: bool) -> str:
    name = specialist["name"]
    if specialist.get("kind") == "write":
        text = f"As {name}, write the agreed result to {WRITE_PATH}. [sim:write {WRITE_PATH}] {task}"
    elif specialist.get("kind") == "qa":
        text = f"As {name}, verify the result written to {WRITE_PATH}: {task}"
    else:
        text = f"As {name}, check this task and report its result: {task}"
    return text + (" [sim:fail 500]" if fail else "")


def _labelled(text: str, label: str) -> Any:
    """The JSON after ``label`` at the start of a line of ``text``; None when absent."""
    for line in text.splitlines():
        if line.startswith(label):
            return json.loads(line[len(label) :])
    return None


def _max_items(schema: dict[str, Any]) -> int | None:
    return schema.get("properties", {}).get("assignments", {}).get("maxItems")


SCRIPTS: dict[str, Callable[[Prompt], Any]] = {ASSIGNMENTS: assignments, DECISION: decision, QA_VERDICT: qa_verdict}
