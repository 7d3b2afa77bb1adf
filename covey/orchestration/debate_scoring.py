"""How a debate picks its winner: pure arithmetic over the critics' scores.

Debaters are known by their index (0..N-1). A round's scores map each critic to
the scores it gave, ``{critic: {target: score}}``. The rules a caller may rely on:

- a debater's mean peer score is the mean of every score another debater gave
  it, over all rounds; a score a critic gave itself, or gave a debater out of the
  running, never counts; a debater nobody scored has a mean of 0
- its combined score is ``peer_weight * mean + confidence_weight * confidence``,
  rounded to ``PRECISION`` places so that the threshold test below does not
  hinge on float noise
- the winner has the highest combined score, the lowest index on a tie, and
  consensus is reached when its combined score is at or above the threshold
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

PRECISION = 6  # decimal places of a combined score

Scores = Mapping[int, Mapping[int, float]]  # one round: critic -> target -> score


@dataclass(frozen=True)
class Verdict:
    winner: int
    consensus: bool
    peer_means: dict[int, float]
    combined: dict[int, float]


def valid_scores(raw: Any, critic: int, targets: Iterable[int]) -> dict[int, float]:
    """The scores of one critique that count: numbers in [0, 1] for ``targets``
    other than the critic, keyed by index. ``raw`` is the critique's ``scores``
    object as the model sent it (keys are JSON strings); anything else is dropped,
    so a sloppy critique loses scores instead of crashing the debate."""
    if not isinstance(raw, Mapping):
        return {}
    kept = {}
    for target in targets:
        value = raw.get(str(target))
        if target != critic and _is_score(value):
            kept[target] = float(value)
    return kept


def _is_score(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


def peer_means(rounds: Iterable[Scores], debaters: Iterable[int]) -> dict[int, float]:
    """Each debater's mean peer score over every round (0 when nobody scored it)."""
    received: dict[int, list[float]] = {d: [] for d in debaters}
    for scores in rounds:
        for critic, given in scores.items():
            for target, score in given.items():
                if target != critic and target in received:
                    received[target].append(score)
    return {d: sum(got) / len(got) if got else 0.0 for d, got in received.items()}


def combined_scores(
    means: Mapping[int, float], confidences: Mapping[int, float], peer_weight: float, confidence_weight: float
) -> dict[int, float]:
    """Each debater's combined score, rounded to ``PRECISION`` places."""
    return {d: round(peer_weight * mean + confidence_weight * confidences[d], PRECISION) for d, mean in means.items()}


def decide(
    rounds: Iterable[Scores],
    confidences: Mapping[int, float],
    *,
    peer_weight: float,
    confidence_weight: float,
    threshold: float,
) -> Verdict:
    """The verdict among the debaters of ``confidences`` (those with a proposal).

    Raises ``ValueError`` when there is none: the caller decides what a debate
    without proposals ends as."""
    if not confidences:
        raise ValueError("no proposals to decide between")
    means = peer_means(rounds, sorted(confidences))
    combined = combined_scores(means, confidences, peer_weight, confidence_weight)
    winner = min(combined, key=lambda d: (-combined[d], d))
    return Verdict(winner=winner, consensus=combined[winner] >= threshold, peer_means=means, combined=combined)
