import csv

import pytest

from covey.sweeps.chart import figure
from covey.sweeps.records import Record, RecordUsage, ResultsLog
from covey.sweeps.report import build_report, chart_title, summarize, table


def rec(unit, config, status="completed", score=1.0, tokens=100, latency=1.0, scorer="exact"):
    return Record(
        unit=f"{config}/{unit}",
        sample_id=unit,
        config=config,
        config_key=config,
        status=status,
        score=score,
        scores={} if score is None else {scorer: score},
        usage=RecordUsage(total_tokens=tokens, cycles=2),
        latency=latency,
    )


def test_a_configuration_row_counts_what_ran_and_scores_it():
    rows = summarize(
        [
            rec("a", "x", score=1.0, latency=1.0),
            rec("b", "x", score=0.0, latency=3.0),
            rec("c", "x", "failed", score=None, tokens=10, latency=2.0),
            rec("d", "x", "skipped_budget", score=None, tokens=0, latency=None),
            rec("a", "y", score=1.0),
        ]
    )
    x, y = rows
    assert (x.config, x.units, x.ran) == ("x", 4, 3)
    assert x.accuracy == pytest.approx(1 / 3)
    assert x.stderr == pytest.approx(((2 * (1 / 3) ** 2 + (2 / 3) ** 2) / 2 / 3) ** 0.5)
    assert (x.total_tokens, x.mean_tokens, x.mean_cycles) == (210, 70, 2)
    assert (x.p50_latency, x.p95_latency) == (2.0, pytest.approx(2.9))
    assert x.statuses == {"completed": 2, "failed": 1, "skipped_budget": 1}
    assert (y.accuracy, y.stderr) == (1.0, 0.0)
    assert "33.3% ± 33.3%" in table(rows)


def test_a_later_attempt_replaces_an_earlier_one():
    (row,) = summarize([rec("a", "x", "failed", score=None), rec("a", "x", score=1.0)])
    assert (row.units, row.accuracy, row.statuses) == (1, 1.0, {"completed": 1})


def test_the_report_is_rebuilt_from_results_alone(tmp_path):
    log = ResultsLog(tmp_path)
    for r in [rec("a", "x"), rec("b", "x", "failed", score=None), rec("a", "y", score=0.0)]:
        log.append(r)
    log.close()
    rows, drawn = build_report(tmp_path)
    assert [r.config for r in rows] == ["x", "y"]
    with (tmp_path / "summary.csv").open() as f:
        written = list(csv.DictReader(f))
    assert written[0]["config"] == "x" and written[0]["accuracy"] == "0.5" and written[0]["status_failed"] == "1"
    assert drawn and (tmp_path / "summary.png").read_bytes().startswith(b"\x89PNG")


def test_no_results_is_said(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results to report"):
        build_report(tmp_path)


def test_a_cancelled_unit_is_counted_and_not_scored_as_wrong():
    (row,) = summarize([rec("a", "x"), rec("b", "x"), rec("c", "x", "cancelled", score=None)])
    assert (row.units, row.ran, row.accuracy, row.statuses) == (3, 3, 1.0, {"cancelled": 1, "completed": 2})


def test_a_wrapped_up_answer_is_scored_and_counted_apart():
    wrapped = rec("b", "x", score=0.0).model_copy(update={"wrapped_up": True})
    (row,) = summarize([rec("a", "x"), wrapped])
    assert (row.ran, row.accuracy, row.statuses) == (2, 0.5, {"completed": 1, "wrapped_up": 1})
    assert "completed=1 wrapped_up=1" in table([row])


def test_the_report_names_its_scorer_in_the_csv_and_the_chart(tmp_path):
    log = ResultsLog(tmp_path)
    for r in [rec("a", "x", scorer="numeric"), rec("b", "x", score=0.0, scorer="numeric")]:
        log.append(r)
    log.close()
    (row,), _ = build_report(tmp_path)
    assert row.scorer == "numeric"
    with (tmp_path / "summary.csv").open() as f:
        assert next(csv.DictReader(f))["scorer"] == "numeric"
    assert chart_title([row], "out") == "Accuracy (numeric) against tokens: out"
    assert figure([row], chart_title([row], "out")).axes[0].get_title() == chart_title([row], "out")
