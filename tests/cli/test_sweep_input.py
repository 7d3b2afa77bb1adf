"""``covey sweep`` refuses inputs that cannot run in one line naming the file and the
line or field, before any job is enqueued (exit 2)."""

from __future__ import annotations

import json

import pytest
import redis

from tests.broker_queues import queue_length
from tests.cli.test_cli import covey
from tests.redis_server import RedisServer


@pytest.fixture(scope="module")
def redis_server():
    """This module's own Redis: its refusals are those of a store no worker publishes a
    catalog to, and the session's may have a live worker serving ``sim`` on every queue."""
    with RedisServer() as server:
        yield server


def files(tmp_path, grid: str, rows: str | None = None, name: str = "d.jsonl") -> tuple[str, str]:
    data, grid_path = tmp_path / name, tmp_path / "g.toml"
    data.write_text(rows if rows is not None else json.dumps({"id": 1, "input": "What is 1 + 1?", "target": 2}) + "\n")
    grid_path.write_text(grid)
    return str(data), str(grid_path)


def refused(redis_server, tmp_path, data: str, grid: str, *more: str) -> str:
    queued = queue_length(redis.Redis.from_url(redis_server.url), "covey-sweeps")
    proc = covey("sweep", data, "--grid", grid, "--out", str(tmp_path / "out"), *more, redis_url=redis_server.url)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert queue_length(redis.Redis.from_url(redis_server.url), "covey-sweeps") == queued
    return proc.stderr.strip()


def test_a_model_no_endpoint_serves_is_refused_with_the_closest_name(redis_server, tmp_path):
    data, grid = files(tmp_path, 'models = ["simm"]\nstrategies = ["single"]\n')
    line = refused(redis_server, tmp_path, data, grid)
    assert line.startswith("Error: g.toml: configuration simm/single: model 'simm': no endpoint")
    assert line.endswith("did you mean 'sim'?")
    assert not (tmp_path / "out").exists()


def test_a_sample_id_the_dataset_lacks_is_refused_naming_it(redis_server, tmp_path):
    data, grid = files(tmp_path, 'strategies = ["single"]\n')
    line = refused(redis_server, tmp_path, data, grid, "--sample-id", "1", "--sample-id", "nope")
    assert line == "Error: sample id 'nope': no sample of d.jsonl has it"


def test_reusing_out_with_another_dataset_or_grid_is_refused_naming_which(tmp_path):
    """The first run (no worker: it stops at its timeout) leaves sweep.json; a second
    run on the same --out with other content is refused before it sends anything."""
    with RedisServer() as server:
        data, grid = files(tmp_path, 'strategies = ["single"]\n')
        out = str(tmp_path / "out")
        first = covey("sweep", data, "--grid", grid, "--out", out, "--timeout", "0.5", redis_url=server.url)
        assert first.returncode == 3, first.stderr
        manifest = json.loads((tmp_path / "out" / "sweep.json").read_text())
        assert [c["strategy"] for c in manifest["grid_run"]["configurations"]] == ["single"]
        other = tmp_path / "other.jsonl"
        other.write_text(json.dumps({"id": 1, "input": "What is 2 + 2?", "target": 4}) + "\n")
        line = refused(server, tmp_path, str(other), grid)
        assert line.startswith(f"Error: {out} holds sweep {manifest['id']} of another dataset ({data} as it was then)")
        (tmp_path / "g.toml").write_text('strategies = ["react"]\n')
        line = refused(server, tmp_path, data, grid)
        assert f"of another grid ({grid} as it was then): give another --out, or the same grid" in line


@pytest.mark.parametrize(
    "name, rows, grid, message",
    [
        ("d.csv", "id,input,target\n1,What is 1 + 1?,\n", 'strategies = ["single"]\n', "d.csv line 2: target: missing"),
        (
            "d.jsonl",
            '{"id": 1, "input": "   "}\n',
            'strategies = ["single"]\n',
            "d.jsonl line 1: input: only whitespace",
        ),
        ("d.jsonl", None, "", "g.toml: empty grid"),
    ],
)
def test_a_row_without_a_target_a_blank_task_or_an_empty_grid_is_refused(
    redis_server, tmp_path, name, rows, grid, message
):
    data, grid_path = files(tmp_path, grid, rows, name)
    assert refused(redis_server, tmp_path, data, grid_path).startswith(f"Error: {message}")


def test_a_report_on_a_corrupt_results_line_names_it(redis_server, tmp_path):
    (tmp_path / "results.jsonl").write_text('{"unit": "a"}\n')
    proc = covey("sweep-report", str(tmp_path), redis_url=redis_server.url)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(f"Error: {tmp_path / 'results.jsonl'} line 1: sample_id: Field required;")
    assert len(line.splitlines()) == 1


@pytest.mark.parametrize("reading", [("--sample", "7"), ("--export",)])
def test_a_rescore_asked_with_transcripts_is_refused_in_one_line(redis_server, tmp_path, reading):
    proc = covey("sweep-report", str(tmp_path), "--scorer", "exact", *reading, redis_url=redis_server.url)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "Error: --scorer re-scores the summary; it does not go with --sample or --export"
    assert not (tmp_path / "transcripts.jsonl").exists()
