"""The sim's answers to the lats strategy's structured calls, by schema name.

``lats_candidates`` (an expansion) proposes, for a path of D actions so far, the
first N of these (N = the schema's ``minItems``), rotated right by D so the right
one moves about:

1. ``compute <A op B> directly`` (``compute the answer directly`` without arithmetic)
2. ``estimate <A op B> roughly``
3. ``restate the task before answering``
4. ``try approach K`` for K = 4, 5, ...

``lats_evaluation`` (an evaluator) judges the last action of its path:

- ``compute ...``: score 1.0, answer the right number (else the plain text answer),
  solved from simulation K on (K = 1 by default)
- ``estimate ...``: score 0.4, answer the number rounded to tens
- ``restate ...``: score 0.2, no answer; anything else: score 0.1, no answer

``[sim:lats solve=K]`` (K >= 1) in the task delays ``solved`` to simulation K, so a
search with fewer simulations runs them all and answers its best path unsolved.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from covey.models.sim.directives import DirectiveError
from covey.models.sim.scripted.prompt import Prompt

COMPUTE, ESTIMATE, RESTATE = "compute", "estimate", "restate"
SCORES = {COMPUTE: 1.0, ESTIMATE: 0.4, RESTATE: 0.2}
OTHER_SCORE = 0.1

_SOLVE = re.compile(r"solve=(\d+)")
_SIMULATION = re.compile(r"Tree search simulation (\d+)")
_STEP = re.compile(r"^\d+\. (.+)$")


def candidates(prompt: Prompt) -> dict[str, Any]:
    count = prompt.schema["properties"]["candidates"]["minItems"]
    target = prompt.directives.expression or "the answer"
    kinds = [f"{COMPUTE} {target} directly", f"{ESTIMATE} {target} roughly", f"{RESTATE} the task before answering"]
    chosen = (kinds + [f"try approach {k}" for k in range(len(kinds) + 1, count + 1)])[:count]
    shift = len(_path(prompt.last)) % count
    return {"candidates": chosen[-shift:] + chosen[:-shift] if shift else chosen}


def evaluation(prompt: Prompt) -> dict[str, Any]:
    steps = _path(prompt.task)
    kind = steps[-1].split(" ", 1)[0] if steps else ""
    score = SCORES.get(kind, OTHER_SCORE)
    if kind == COMPUTE:
        simulation = _SIMULATION.search(prompt.task)
        solved = (int(simulation[1]) if simulation else 1) >= _solve_at(prompt)
        return {
            "score": score,
            "reflection": "the direct computation answers the task",
            "solved": solved,
            "answer": prompt.answers.text,
        }
    if kind == ESTIMATE:
        return {
            "score": score,
            "reflection": "rounding loses the exact answer; compute it instead",
            "solved": False,
            "answer": _rounded(prompt),
        }
    return {"score": score, "reflection": "this step gives no answer; compute one", "solved": False, "answer": ""}


def _path(text: str) -> list[str]:
    """The numbered actions under the last ``Path:`` line, as lats writes them."""
    _, found, rest = text.rpartition("Path:\n")
    if not found:
        return []
    steps = []
    for line in rest.splitlines():
        step = _STEP.match(line)
        if step is None:
            break
        steps.append(step[1])
    return steps


def _solve_at(prompt: Prompt) -> int:
    """The K of ``[sim:lats solve=K]``; 1 when the directive is absent or bare."""
    args = prompt.directives.scripted.get("lats")
    if not args:
        return 1
    solve = _SOLVE.fullmatch(args)
    if solve is None or int(solve[1]) < 1:
        raise DirectiveError(f"[sim:lats {args}]: expected solve=K with K >= 1, or nothing")
    return int(solve[1])


def _rounded(prompt: Prompt) -> str:
    number = prompt.answers.number
    return prompt.answers.text if number is None else str(int(round(number, -1)))


SCRIPTS: dict[str, Callable[[Prompt], Any]] = {"lats_candidates": candidates, "lats_evaluation": evaluation}
