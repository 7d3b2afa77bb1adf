"""The sim's answers to the debate strategy's structured calls, by schema name.

It reads a debater's task as a model would: ``Debater I of N`` names the debater,
and a critic's task carries the proposals on one line,
``Proposals (JSON, by debater index): {...}``.

- ``proposal``: debater I answers the task's answer (the arithmetic's result when
  there is one) with confidence ``max(0.5, 0.9 - 0.05 * I)``
- ``critique``: a critic scores each other debater it is asked about ``AGREE``
  (0.9) when that debater's answer equals its own, ``DISAGREE`` (0.1) otherwise

Grammar: ``[sim:debate]`` takes one argument, ``split``: debater I > 0 then answers
the result plus I (or the text answer with `` (variant I)``), so every debater
disagrees with every other, all scores are low and no consensus is reached.
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
SPLIT = "split"

_DEBATER = re.compile(r"Debater (\d+) of \d+")
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


def _answer(prompt: Prompt, index: int) -> str:
    """The right answer, or under ``split`` a different one for every debater but 0."""
    split = _split(prompt)
    number = prompt.answers.number
    if number is not None:
        return str(number + index if split else number)
    return f"{prompt.answers.text} (variant {index})" if split and index else prompt.answers.text


def _split(prompt: Prompt) -> bool:
    arg = prompt.directives.scripted.get("debate")
    if arg not in (None, SPLIT):
        raise DirectiveError(f"[sim:debate {arg}]: expected [sim:debate {SPLIT}]")
    return arg == SPLIT


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


SCRIPTS: dict[str, Callable[[Prompt], Any]] = {"proposal": proposal, "critique": critique}
