"""The sim's answers to the debate strategy's structured calls, by schema name.

It reads a debater's task as a model would: ``Debater I of N`` names the debater,
and a critic's task carries the proposals on one line,
``Proposals (JSON, by debater index): {...}``.

- ``proposal``: debater I answers the task's answer (the arithmetic's result when
  there is one) with confidence ``max(0.5, 0.9 - 0.05 * I)``
- ``critique``: a critic scores each other debater it is asked about ``AGREE``
  (0.9) when that debater's answer equals its own, ``DISAGREE`` (0.1) otherwise
- ``revision``: debater I keeps its answer (``changed``: ``kept my answer``), at the
  proposal's confidence

Grammar: ``[sim:debate]`` takes one argument:

- ``split``: debater I > 0 proposes the result plus I (or the text answer with
  `` (variant I)``), so every debater disagrees with every other, all scores are low
  and no consensus is reached, and nobody changes its mind when revising
- ``revise``: the proposals split the same way, and every revision answers the right
  answer (``changed``: ``took the others' critique``), so the debaters agree after
  one revision

Anything else raises ``DirectiveError`` (the sim answers HTTP 400).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from covey.models.sim.directives import DirectiveError
from covey.models.sim.scripted.prompt import Prompt

AGREE, DISAGREE = 0.9, 0.1
SPLIT, REVISE = "split", "revise"

_DEBATER = re.compile(r"Debater (\d+) \(of \d+, numbered from 0\)")
_PROPOSALS = re.compile(r"^Proposals \(JSON, by debater index\): (.+)$", re.MULTILINE)


def proposal(prompt: Prompt) -> dict[str, Any]:
    index = _debater(prompt)
    return {
        "answer": _answer(prompt, index),
        "confidence": max(0.5, round(0.9 - 0.05 * index, 2)),
        "reasoning": f"debater {index} worked it out",
    }


def critique(prompt: Prompt) -> dict[str, Any]:
    index = _debater(prompt)
    proposals = _proposals(prompt)
    own = proposals.get(str(index), {}).get("answer")
    targets = prompt.schema.get("properties", {}).get("scores", {}).get("properties", {})
    scores = {t: AGREE if proposals.get(t, {}).get("answer") == own else DISAGREE for t in targets}
    return {"scores": scores, "reasoning": f"debater {index} scored the others against its own answer"}


def revision(prompt: Prompt) -> dict[str, Any]:
    index = _debater(prompt)
    scenario = _scenario(prompt)
    if scenario == REVISE:
        answer, changed = _answer(prompt, 0, split=False), "took the others' critique"
    else:
        own = _proposals(prompt).get(str(index), {}).get("answer")
        answer, changed = (own if isinstance(own, str) else _answer(prompt, index)), "kept my answer"
    return {"answer": answer, "confidence": max(0.5, round(0.9 - 0.05 * index, 2)), "changed": changed}


def _answer(prompt: Prompt, index: int, split: bool | None = None) -> str:
    """The right answer, or when the proposals split a different one for every debater but 0."""
    if split is None:
        split = _scenario(prompt) in (SPLIT, REVISE)
    number = prompt.answers.number
    if number is not None:
        return str(number + index if split else number)
    return f"{prompt.answers.text} (variant {index})" if split and index else prompt.answers.text


def _scenario(prompt: Prompt) -> str | None:
    arg = prompt.directives.scripted.get("debate")
    if arg not in (None, SPLIT, REVISE):
        raise DirectiveError(f"[sim:debate {arg}]: expected [sim:debate {SPLIT}] or [sim:debate {REVISE}]")
    return arg


def _debater(prompt: Prompt) -> int:
    found = _DEBATER.search(prompt.task)
    return int(found[1]) if found else 0


def _proposals(prompt: Prompt) -> dict[str, Any]:
    found = _PROPOSALS.findall(prompt.task)
    try:
        proposals = json.loads(found[-1]) if found else {}
    except ValueError:
        return {}
    return proposals if isinstance(proposals, dict) else {}


SCRIPTS: dict[str, Callable[[Prompt], Any]] = {"proposal": proposal, "critique": critique, "revision": revision}
