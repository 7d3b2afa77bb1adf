import json

import pytest

from covey.sweeps.errors import SweepInputError
from covey.sweeps.manifest import Manifest
from covey.sweeps.records import Record
from covey.sweeps.rescore import rescore


def recorded(sample_id: str, output: str | None, status: str = "completed") -> Record:
    return Record(
        unit=f"c/0/{sample_id}",
        sample_id=sample_id,
        config="c",
        config_key="c",
        status=status,
        output=output,
        target=2,
        score=1.0 if status == "completed" else None,
        scores={"old": 1.0} if status == "completed" else {},
    )


@pytest.fixture
def sweep(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "1", "input": "What is 1 + 1?", "target": 2}) + "\n")
    grid_run = {"scorers": [{"kind": "includes", "name": "mentions"}, {"kind": "model", "name": "judge"}]}
    Manifest.open(tmp_path / "out", str(data), "g.toml", None, None, grid_run=grid_run)
    return tmp_path / "out"


def test_each_completed_record_is_scored_by_every_scorer_named_the_first_its_score(sweep):
    again = rescore(
        sweep,
        [recorded("1", "The answer is 2."), recorded("2", None, "failed")],
        ["exact", "tests.sweeps.scoring_fixtures:half_credit", "mentions"],
    )
    assert again[0].score == 0.0
    assert again[0].scores == {"exact": 0.0, "tests.sweeps.scoring_fixtures:half_credit": 0.5, "mentions": 1.0}
    assert (again[1].score, again[1].scores) == (None, {})


def test_a_model_judge_or_a_scorer_named_twice_is_refused_naming_it(sweep):
    with pytest.raises(SweepInputError, match="scorer 'judge' is a model judge, which runs as a job"):
        rescore(sweep, [], ["judge"])
    with pytest.raises(SweepInputError, match="--scorer exact is given twice"):
        rescore(sweep, [], ["exact", "exact"])
