"""Scorers: how a sample's output is marked against its target, 0.0 to 1.0.

``exact``, ``includes``, ``regex`` and ``numeric`` are pure functions of the output
and the target. ``model`` asks a judge model: it is a covey job of its own,
charged to the same sweep scope, so judging counts against the sweep's cap. Any
other kind names a Python callable ``module:function`` taking
``(output, target, sample)`` and returning a bool or a number in [0, 1].
A grid may list several; each sample is scored by all of them, side by side.
"""

from __future__ import annotations

import importlib
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from covey.results import AgentResult
from covey.spec import JobSpec
from covey.sweeps.dataset import Sample
from covey.sweeps.records import Record

BUILT_IN = ("exact", "includes", "regex", "numeric", "model")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["correct"],
}


class ScorerSpec(BaseModel):
    """The grid's ``scorer``: a kind and the options that kind reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(default="exact", min_length=1, description=f"one of {', '.join(BUILT_IN)}, or module:function")
    ignore_case: bool = Field(default=False, description="exact, includes")
    pattern: str | None = Field(default=None, description="regex: extract group 1 (or the match) to compare")
    tolerance: float = Field(default=1e-6, ge=0, description="numeric: absolute tolerance")
    relative_tolerance: float = Field(default=0.0, ge=0, description="numeric: relative tolerance")
    model: str | None = Field(default=None, min_length=1, description="model: the judge's model")
    name: str | None = Field(default=None, min_length=1, max_length=40, description="its column; default its kind")

    @property
    def title(self) -> str:
        return self.name or self.kind

    def build(self) -> Scorer | ModelJudge:
        """The scorer, or ``ValueError`` naming what is wrong (an unknown kind, a
        bad pattern, a callable that cannot be imported)."""
        if self.kind == "model":
            return ModelJudge(self.model, self.title)
        if self.kind in BUILT_IN:
            if self.pattern is not None:
                try:
                    re.compile(self.pattern)
                except re.error as e:
                    raise ValueError(f"pattern: {e}") from None
            return Scorer(self.title, getattr(self, f"_{self.kind}"))
        return Scorer(self.title, _imported(self.kind))

    def _exact(self, output: str, target: Any, sample: Sample) -> float:
        return float(_fold(output.strip(), self.ignore_case) == _fold(str(target).strip(), self.ignore_case))

    def _includes(self, output: str, target: Any, sample: Sample) -> float:
        return float(_fold(str(target), self.ignore_case) in _fold(output, self.ignore_case))

    def _regex(self, output: str, target: Any, sample: Sample) -> float:
        """Without ``pattern`` the target is the regex; with it, what the pattern
        extracts from the output must equal the target."""
        if self.pattern is None:
            return float(re.search(str(target), output) is not None)
        found = re.search(self.pattern, output)
        if found is None:
            return 0.0
        return float((found.group(1) if found.re.groups else found.group(0)).strip() == str(target).strip())

    def _numeric(self, output: str, target: Any, sample: Sample) -> float:
        """The last number in the output against the target, within the tolerances."""
        expected = _number(target)
        if expected is None:
            raise ValueError(f"target {target!r} of sample {sample.id} is not a number")
        numbers = _NUMBER.findall(output)
        if not numbers:
            return 0.0
        got = float(numbers[-1].replace(",", ""))
        return float(math.isclose(got, expected, rel_tol=self.relative_tolerance, abs_tol=self.tolerance))


class Scorer:
    """A local scorer: ``score`` never raises for a missing output (it scores 0)."""

    def __init__(self, name: str, fn: Callable[[str, Any, Sample], Any]) -> None:
        self.name, self._fn = name, fn

    def score(self, output: str | None, sample: Sample) -> float:
        if output is None:
            return 0.0
        value = self._fn(output, sample.target, sample)
        if isinstance(value, bool):
            return float(value)
        if isinstance(value, (int, float)) and 0 <= value <= 1:
            return float(value)
        raise ValueError(f"scorer {self.name} returned {value!r}; expected a bool or a number in [0, 1]")


class ModelJudge:
    """A judge model asked whether the output answers the sample as its target does."""

    def __init__(self, model: str | None, name: str = "model") -> None:
        self.model, self.name = model, name

    def spec(self, sample: Sample, output: str, sweep_id: str) -> JobSpec:
        task = (
            "Grade an answer. Reply whether the submitted answer is correct, i.e. agrees with the reference.\n"
            f"Question: {sample.input}\nReference answer: {sample.target}\nSubmitted answer: {output}"
        )
        fields: dict[str, Any] = {
            "task": task,
            "role": "judge",
            "strategy": "single",
            "sweep": sweep_id,
            "options": {"schema": JUDGE_SCHEMA, "schema_name": "judgement"},
        }
        if self.model is not None:
            fields["model"] = self.model
        return JobSpec.parse(fields)

    @staticmethod
    def verdict(result: AgentResult) -> float:
        """1.0 for a judge that said correct; raises when the judge gave no verdict."""
        if not result.ok or not isinstance(result.data, dict):
            raise ValueError(f"judge {result.status.value}: {result.error or 'no verdict'}")
        return float(result.data.get("correct") is True)


@dataclass(frozen=True)
class Scoring:
    """A grid's scorers, built: the local ones score at once, the judge (one at most)
    as a job of its own. The first scorer listed is the primary: its score is a
    record's ``score`` and the report's accuracy."""

    local: list[Scorer]
    judge: ModelJudge | None
    primary: str

    @classmethod
    def build(cls, specs: list[ScorerSpec]) -> Scoring:
        """``ValueError`` naming the scorer at fault (by its position) or a name used twice."""
        built: list[Scorer | ModelJudge] = []
        for i, spec in enumerate(specs):
            try:
                built.append(spec.build())
            except ValueError as e:
                raise ValueError(f"{i}: {e}" if len(specs) > 1 else str(e)) from None
        names = [s.name for s in built]
        repeated = next((n for n in names if names.count(n) > 1), None)
        if repeated is not None:
            raise ValueError(f"two scorers are named {repeated!r}; give one a distinct name")
        judges = [s for s in built if isinstance(s, ModelJudge)]
        if len(judges) > 1:
            raise ValueError("at most one model judge")
        local = [s for s in built if isinstance(s, Scorer)]
        return cls(local=local, judge=judges[0] if judges else None, primary=names[0])


def mark(scorer: Scorer, record: Record, sample: Sample) -> None:
    """Score ``record`` into its ``scores``; a scorer that raises scores 0 and says why."""
    try:
        record.scores[scorer.name] = scorer.score(record.output, sample)
    except Exception as e:
        record.scores[scorer.name] = 0.0
        score_failed(record, scorer.name, f"{type(e).__name__}: {e}")


def score_failed(record: Record, name: str, why: str) -> None:
    """Note why a scorer gave no score, beside any other scorer's reason."""
    record.score_error = "; ".join(filter(None, [record.score_error, f"{name}: {why}"]))


def _fold(text: str, ignore_case: bool) -> str:
    return text.casefold() if ignore_case else text


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None


def _imported(name: str) -> Callable[..., Any]:
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise ValueError(f"unknown kind {name!r}: use one of {', '.join(BUILT_IN)}, or module:function")
    if os.getcwd() not in sys.path:  # `covey sweep` run where the scorer's module lives
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"cannot import {module_name!r} for {name}: {e}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{module_name} has no function {attr!r}")
    return fn
