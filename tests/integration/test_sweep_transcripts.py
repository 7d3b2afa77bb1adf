"""A sweep keeps its transcripts: each result names its job, ``sweep-report --sample``
prints a sample's transcript while the job's records last, and ``--export`` writes
them all to a file that outlives Redis."""

from __future__ import annotations

import json

from tests.integration.test_sweep import covey, dataset, db, results, single_grid, sweep_redis, sweep_worker

__all__ = ["db", "sweep_redis", "sweep_worker"]  # the fixtures, shared with test_sweep


def ran(sweep_redis, *args: str) -> tuple[int, str, str]:
    proc = covey(sweep_redis, *args)
    stdout, stderr = proc.communicate(timeout=120)
    return proc.returncode, stdout, stderr


def swept(sweep_redis, tmp_path, samples: int):
    out = tmp_path / "out"
    code, _, stderr = ran(
        sweep_redis, "sweep", dataset(tmp_path, samples), "--grid", single_grid(tmp_path), "--out", str(out)
    )
    assert code == 0, stderr
    return out


def test_a_samples_transcript_while_it_lasts_and_an_export_that_outlives_it(sweep_redis, sweep_worker, tmp_path, db):
    out = tmp_path / "out"
    code, _, stderr = ran(
        sweep_redis, "sweep", dataset(tmp_path, 3), "--grid", single_grid(tmp_path), "--out", str(out)
    )
    assert code == 0, stderr
    jobs = {r["sample_id"]: r["job_id"] for r in results(out)}
    assert sorted(jobs) == ["0", "1", "2"] and all(jobs.values())

    code, stdout, stderr = ran(sweep_redis, "sweep-report", str(out), "--sample", "1")
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("unit ") and lines[0].endswith(f" · completed · job {jobs['1']}")
    assert lines[1].startswith("agent root · root · completed · ")
    assert "  → user       What is 1 + 1? " in lines and "  ← assistant  2" in lines

    code, stdout, stderr = ran(sweep_redis, "sweep-report", str(out), "--export")
    assert code == 0, stderr
    assert stdout.strip() == f"wrote {out / 'transcripts.jsonl'}: 3 units, 3 transcripts"

    for key in db.scan_iter(f"covey:{{{jobs['2']}}}:*"):  # sample 2's job expired (COVEY_JOB_TTL)
        db.delete(key)
    code, stdout, stderr = ran(sweep_redis, "sweep-report", str(out), "--sample", "2")
    assert code == 0, stderr
    assert stdout.splitlines()[1] == (
        f"  the records of job {jobs['2']} have expired from Redis (COVEY_JOB_TTL): no transcript left; "
        "`covey sweep-report DIR --export` keeps them while they last"
    )
    exported = {
        line["sample_id"]: line for line in map(json.loads, (out / "transcripts.jsonl").read_text().splitlines())
    }
    (root,) = exported["2"]["agents"]
    assert exported["2"]["job_id"] == jobs["2"] and root["agent_id"] == "root"
    assert root["transcript"]["events"][0]["sent"][1]["content"].startswith("What is 2 + 1?")


def test_a_sample_the_sweep_does_not_have_is_one_line(sweep_redis, sweep_worker, tmp_path):
    out = tmp_path / "out"
    code, _, stderr = ran(
        sweep_redis, "sweep", dataset(tmp_path, 2), "--grid", single_grid(tmp_path), "--out", str(out)
    )
    assert code == 0, stderr
    code, stdout, stderr = ran(sweep_redis, "sweep-report", str(out), "--sample", "9")
    assert code == 2 and stdout == ""
    assert stderr.strip() == f"Error: {out}: no sample '9' in its results (samples: 0, 1)"
