import pytest

from covey.sweeps.errors import SweepInputError
from covey.sweeps.records import Record, ResultsLog


def record(unit, status="completed", **fields):
    return Record(unit=unit, sample_id=unit, config="c", config_key="k", status=status, **fields)


def test_the_latest_record_of_a_unit_wins_and_survives_a_reopen(tmp_path):
    log = ResultsLog(tmp_path)
    log.append(record("a", "failed"))
    log.append(record("a", "completed", attempt=2))
    log.append(record("b", "skipped_budget"))
    log.close()
    latest = ResultsLog(tmp_path).latest()
    assert latest["a"].attempt == 2 and latest["a"].kept
    assert not latest["b"].kept


def test_a_torn_last_line_is_skipped_and_closed_off(tmp_path):
    log = ResultsLog(tmp_path)
    log.append(record("a"))
    log.close()
    with log.path.open("a") as f:
        f.write('{"unit": "b", "sta')  # a submitter killed mid-write
    log = ResultsLog(tmp_path)
    assert list(log.latest()) == ["a"]
    log.append(record("c"))
    log.close()
    assert list(ResultsLog(tmp_path).latest()) == ["a", "c"]
    log = ResultsLog(tmp_path)  # killed mid-write a second time
    with log.path.open("a") as f:
        f.write('{"unit": "d"')
    log.append(record("e"))
    log.close()
    assert list(ResultsLog(tmp_path).latest()) == ["a", "c", "e"]


@pytest.mark.parametrize("line, why", [("garbage", "not valid JSON"), ('{"unit": "b"}', "sample_id: Field required")])
def test_a_corrupt_line_other_than_a_torn_one_is_refused_naming_it(tmp_path, line, why):
    log = ResultsLog(tmp_path)
    log.append(record("a"))
    log.close()
    with log.path.open("a") as f:
        f.write(line + "\n")
    log.append(record("c"))
    log.close()
    with pytest.raises(SweepInputError, match=f"results.jsonl line 2: {why}"):
        list(ResultsLog(tmp_path).records())
