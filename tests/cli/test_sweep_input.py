"""``covey sweep`` refuses inputs that cannot run in one line naming the file and the
line or field, before any job is enqueued (exit 2)."""

from __future__ import annotations

import json

import redis

from tests.cli.test_cli import covey


def files(tmp_path, grid: str, rows: str | None = None, name: str = "d.jsonl") -> tuple[str, str]:
    data, grid_path = tmp_path / name, tmp_path / "g.toml"
    data.write_text(rows if rows is not None else json.dumps({"id": 1, "input": "What is 1 + 1?", "target": 2}) + "\n")
    grid_path.write_text(grid)
    return str(data), str(grid_path)


def refused(redis_server, tmp_path, data: str, grid: str, *more: str) -> str:
    queued = redis.Redis.from_url(redis_server.url).llen("covey-sweeps")
    proc = covey("sweep", data, "--grid", grid, "--out", str(tmp_path / "out"), *more, redis_url=redis_server.url)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert redis.Redis.from_url(redis_server.url).llen("covey-sweeps") == queued
    return proc.stderr.strip()


def test_a_model_no_endpoint_serves_is_refused_with_the_closest_name(redis_server, tmp_path):
    data, grid = files(tmp_path, 'models = ["simm"]\nstrategies = ["single"]\n')
    line = refused(redis_server, tmp_path, data, grid)
    assert line.startswith("Error: g.toml: configuration simm/single: model 'simm': no endpoint")
    assert line.endswith("did you mean 'sim'?")
    assert not (tmp_path / "out").exists()
