import json

import pytest

from covey.sweeps.dataset import load_dataset
from covey.sweeps.errors import SweepInputError


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_jsonl_samples_keep_ids_targets_and_metadata(tmp_path):
    path = write(
        tmp_path,
        "d.jsonl",
        '{"id": 1, "input": "What is 2 + 2?", "target": 4, "metadata": {"op": "+"}}\n\n{"id": "b", "input": "x"}\n',
    )
    first, second = load_dataset(path)
    assert (first.id, first.target, first.metadata) == ("1", 4, {"op": "+"})
    assert second.target is None


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"id": "a", "input": "x"}', '{"id": "b", "input": '], "d.jsonl line 2: not valid JSON"),
        (['{"id": "a", "input": "x"}', '{"id": "b"}'], "d.jsonl line 2: input: Field required"),
        (['{"id": "a", "input": ""}'], "d.jsonl line 1: input:"),
        (['{"id": "a", "input": "x", "extra": 1}'], "d.jsonl line 1: extra: Extra inputs are not permitted"),
        (['{"id": "a", "input": "x"}', '["a", "x"]'], "d.jsonl line 2: expected a JSON object"),
        (['{"id": "a", "input": "x"}', '{"id": "a", "input": "y"}'], "line 2: id: 'a' repeats the id of line 1"),
        (['{"input": "x", "id": "a", "metadata": 3}'], "line 1: metadata:"),
    ],
)
def test_a_bad_line_is_refused_naming_the_line_and_field(tmp_path, lines, message):
    with pytest.raises(SweepInputError, match=message):
        load_dataset(write(tmp_path, "d.jsonl", "\n".join(lines) + "\n"))


def test_csv_extra_columns_go_to_metadata(tmp_path):
    path = write(tmp_path, "d.csv", 'id,input,target,metadata,level\n1,What is 1 + 1?,2,"{""op"": ""+""}",easy\n')
    (sample,) = load_dataset(path)
    assert (sample.id, sample.input, sample.target) == ("1", "What is 1 + 1?", "2")
    assert sample.metadata == {"level": "easy", "op": "+"}


def test_csv_without_an_input_column_is_refused(tmp_path):
    with pytest.raises(SweepInputError, match="d.csv line 1: header lacks column 'input'"):
        load_dataset(write(tmp_path, "d.csv", "id,question,target\n1,x,2\n"))


def test_csv_bad_metadata_names_its_line(tmp_path):
    with pytest.raises(SweepInputError, match="d.csv line 3: metadata: not valid JSON"):
        load_dataset(write(tmp_path, "d.csv", "id,input,target,metadata\n1,x,1,{}\n2,y,2,{oops\n"))


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("d.csv", "id,input\n1,x\n", "d.csv line 1: header lacks column 'target'"),
        ("d.csv", "id,input,target\n1,x,1\n2,y,\n", "d.csv line 3: target: missing"),
        ("d.csv", "id,input,target\n1,x\n", "d.csv line 2: target: missing"),
        ("d.jsonl", '{"id": 1, "input": "  \\n\\t"}\n', "d.jsonl line 1: input: only whitespace"),
    ],
)
def test_a_row_without_a_target_or_a_blank_task_is_refused_naming_its_line(tmp_path, name, text, message):
    with pytest.raises(SweepInputError, match=message):
        load_dataset(write(tmp_path, name, text))


def test_an_empty_or_missing_file_is_refused(tmp_path):
    with pytest.raises(SweepInputError, match="no samples"):
        load_dataset(write(tmp_path, "d.jsonl", "\n"))
    with pytest.raises(SweepInputError, match="no such file"):
        load_dataset(tmp_path / "absent.jsonl")


def test_the_shipped_arithmetic_dataset_is_valid():
    samples = load_dataset("examples/arithmetic.jsonl")
    assert len(samples) == 200
    assert all(s.input.startswith("What is ") and isinstance(s.target, int) for s in samples)
    assert json.loads(json.dumps(samples[0].metadata)) == samples[0].metadata
