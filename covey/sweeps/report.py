"""A sweep's summary per configuration, from ``results.jsonl`` alone.

Accuracy is the mean score over the units that ran to an end of their own (a
failed or unscored unit scores 0; ``skipped_budget`` ones did not run and
``cancelled`` ones were stopped by ``covey sweep-cancel``: both are only counted),
with its standard error; with several scorers, the first is the accuracy and each one's
mean score is reported beside it. Tokens, cycles and latency are the sample jobs' own (a judge's
tokens are reported apart). The same rows go to a table, ``summary.csv`` and
``summary.png``, a chart of accuracy against tokens per sample (``covey.sweeps.chart``).
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from pydantic import BaseModel

from covey import wire
from covey.status import AgentStatus
from covey.sweeps.chart import write_chart
from covey.sweeps.records import SKIPPED_BUDGET, WRAPPED_UP, Record, ResultsLog
from covey.sweeps.rescore import rescore

SUMMARY_CSV = "summary.csv"
SUMMARY_PNG = "summary.png"


class ConfigSummary(BaseModel):
    config: str
    units: int  # recorded, whatever their status
    ran: int  # all but skipped_budget
    accuracy: float | None  # 0..1, the primary scorer's, over the units that ran and were not cancelled
    scorer: str | None = None  # the primary scorer's name
    stderr: float | None
    scores: dict[str, float]  # each scorer's mean, by name, when there are several
    mean_tokens: float | None
    total_tokens: int
    total_cost: float | None  # USD; None where no model of the configuration has prices
    judge_tokens: int
    mean_cycles: float | None
    p50_latency: float | None
    p95_latency: float | None
    statuses: dict[str, int]

    def status_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.statuses.items()))


class _Outcome(NamedTuple):
    """What the summary needs of a unit's latest record: a sweep's report holds one per
    unit, where a whole record (its output, cause, ids) would grow with the sweep."""

    config: str
    status: str
    score: float | None
    scores: dict[str, float]
    latency: float | None
    tokens: int
    cost: float
    cycles: int
    judge_tokens: int

    @classmethod
    def of(cls, r: Record) -> _Outcome:
        """A wrapped-up answer is scored as any other, and counted apart (status ``wrapped_up``)."""
        u = r.usage
        status = WRAPPED_UP if r.wrapped_up else r.status
        return cls(r.config, status, r.score, r.scores, r.latency, u.total_tokens, u.cost_usd, u.cycles, r.judge_tokens)


def summarize(records: Iterable[Record]) -> list[ConfigSummary]:
    """One row per configuration, by name; each unit counted by its latest record."""
    latest = {r.unit: _Outcome.of(r) for r in records}
    by_config: dict[str, list[_Outcome]] = {}
    for outcome in latest.values():
        by_config.setdefault(outcome.config, []).append(outcome)
    return [_summary(name, rows) for name, rows in sorted(by_config.items())]


def _summary(name: str, rows: list[_Outcome]) -> ConfigSummary:
    ran = [r for r in rows if r.status != SKIPPED_BUDGET]
    scored = [r for r in ran if r.status != AgentStatus.CANCELLED]  # a cancel is no wrong answer
    scores = [r.score or 0.0 for r in scored]
    names = sorted({n for r in scored for n in r.scores}) if any(len(r.scores) > 1 for r in scored) else []
    latencies = sorted(r.latency for r in ran if r.latency is not None)
    tokens = [r.tokens for r in ran]
    return ConfigSummary(
        config=name,
        units=len(rows),
        ran=len(ran),
        accuracy=_mean(scores),
        stderr=_stderr(scores),
        scorer=next((n for r in scored for n in r.scores), None),  # a record's scores begin with the primary's
        scores={n: sum(r.scores.get(n, 0.0) for r in scored) / len(scored) for n in names},
        mean_tokens=_mean(tokens),
        total_tokens=sum(tokens),
        total_cost=round(sum(r.cost for r in ran), 6) if any(r.cost for r in ran) else None,
        judge_tokens=sum(r.judge_tokens for r in ran),
        mean_cycles=_mean([r.cycles for r in ran]),
        p50_latency=_percentile(latencies, 50),
        p95_latency=_percentile(latencies, 95),
        statuses=dict(Counter(r.status for r in rows)),
    )


def _mean(values: list[float] | list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def _stderr(values: list[float]) -> float | None:
    """Standard error of the mean (sample standard deviation over root n); 0 for one value."""
    if not values:
        return None
    if len(values) == 1:
        return 0.0
    mean = sum(values) / len(values)
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return math.sqrt(variance / len(values))


def _percentile(ordered: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks, as numpy's default."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def table(rows: list[ConfigSummary]) -> str:
    scorers = _scorers(rows)
    return wire.table(
        [
            "configuration",
            "accuracy",
            *scorers,
            "ran",
            "mean tok",
            "total tok",
            "total $",
            "cycles",
            "p50 s",
            "p95 s",
            "statuses",
        ],
        [
            [
                r.config,
                _accuracy(r),
                *(_percent(r.scores.get(n)) for n in scorers),
                r.ran,
                _fixed(r.mean_tokens, 0),
                r.total_tokens,
                _fixed(r.total_cost, 6),
                _fixed(r.mean_cycles, 1),
                _fixed(r.p50_latency, 2),
                _fixed(r.p95_latency, 2),
                r.status_text(),
            ]
            for r in rows
        ],
    )


def _accuracy(r: ConfigSummary) -> str | None:
    if r.accuracy is None:
        return None
    return f"{r.accuracy:.1%} ± {r.stderr or 0:.1%}"


def _scorers(rows: list[ConfigSummary]) -> list[str]:
    """The scorers reported side by side: every name any row has."""
    return sorted({n for r in rows for n in r.scores})


def _percent(value: float | None) -> str | None:
    return None if value is None else f"{value:.1%}"


def _fixed(value: float | None, places: int) -> str | None:
    return None if value is None else f"{value:.{places}f}"


CSV_COLUMNS = [
    "config",
    "units",
    "ran",
    "accuracy",
    "stderr",
    "mean_tokens",
    "total_tokens",
    "total_cost",
    "judge_tokens",
    "mean_cycles",
    "p50_latency",
    "p95_latency",
    "scorer",
]


def write_csv(rows: list[ConfigSummary], path: Path) -> None:
    """One row per configuration; a ``score_<scorer>`` column per scorer when there are
    several, and a ``status_<name>`` column per status seen."""
    statuses = sorted({s for r in rows for s in r.statuses})
    scorers = _scorers(rows)
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS + [f"score_{n}" for n in scorers] + [f"status_{s}" for s in statuses])
        for r in rows:
            values = r.model_dump(include=set(CSV_COLUMNS))
            writer.writerow(
                [_cell(values[c]) for c in CSV_COLUMNS]
                + [_cell(r.scores.get(n)) for n in scorers]
                + [r.statuses.get(s, 0) for s in statuses]
            )


def _cell(value: object) -> object:
    return "" if value is None else round(value, 6) if isinstance(value, float) else value


def build_report(directory: Path, scorers: list[str] | None = None) -> tuple[list[ConfigSummary], bool]:
    """Summarise ``DIR/results.jsonl`` into ``summary.csv`` and ``summary.png``, re-scored
    by ``scorers`` when named (``covey.sweeps.rescore``); returns the rows and whether
    the chart was drawn."""
    directory = Path(directory)
    log = ResultsLog(directory)
    if not log.path.exists():
        raise FileNotFoundError(f"{log.path}: no results to report")
    records = log.records()  # read as summarised; re-scoring holds them all, with their outputs
    rows = summarize(rescore(directory, list(records), scorers) if scorers else records)
    write_csv(rows, directory / SUMMARY_CSV)
    drawn = write_chart(rows, directory / SUMMARY_PNG, title=chart_title(rows, directory.name))
    return rows, drawn


def chart_title(rows: list[ConfigSummary], name: str) -> str:
    """The chart's title: the sweep's folder, and the scorer its accuracy is (after
    ``--scorer numeric``, another accuracy than the grid's)."""
    scorer = next((r.scorer for r in rows if r.scorer), None)
    return f"Accuracy{f' ({scorer})' if scorer else ''} against tokens: {name}"
