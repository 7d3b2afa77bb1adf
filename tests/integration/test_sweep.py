"""Sweeps through a real worker reading the sweeps queue, on a Redis of their own
(so every job counted here is a sweep's)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import redis

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from covey.sweeps import load_grid, run_sweep
from covey.sweeps.manifest import Manifest
from tests.integration.conftest import ROOT, default_ctrl_c, stop_worker, wait_for_worker, worker_env
from tests.redis_server import RedisServer

ARITHMETIC = ROOT / "examples" / "arithmetic.jsonl"
GRID = ROOT / "examples" / "arithmetic.toml"


@pytest.fixture(scope="module")
def sweep_redis():
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="module")
def sweep_worker(sweep_redis):
    """``covey worker`` with four threads, reading its default queues: ``covey`` and ``covey-sweeps``."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "covey",
            "worker",
            "--concurrency",
            "4",
            "--pool",
            "threads",
            "--loglevel",
            "warning",
        ],
        env=worker_env(sweep_redis.url),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_worker(Client(Settings(redis_url=sweep_redis.url)), proc)
    yield proc
    stop_worker(proc)


@pytest.fixture
def settings(sweep_redis, sweep_worker) -> Settings:
    return Settings(redis_url=sweep_redis.url, model="sim")


@pytest.fixture
def db(sweep_redis):
    client = redis.Redis.from_url(sweep_redis.url, decode_responses=True)
    yield client
    client.close()


def covey(sweep_redis, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(sweep_redis.url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def jobs_sent(db) -> int:
    """Every covey job ever submitted to this Redis (one ``submitted`` key each)."""
    return sum(1 for _ in db.scan_iter(match="covey:{*}:submitted", count=1000))


def results(directory) -> list[dict]:
    return [json.loads(line) for line in (directory / "results.jsonl").read_text().splitlines()]


def dataset(tmp_path, n: int, suffix: str = "", first: int | None = None) -> str:
    """``n`` arithmetic samples, ``suffix`` (a sim directive) on the ``first`` of them (default all)."""
    path = tmp_path / "d.jsonl"
    marked = n if first is None else first
    path.write_text(
        "".join(
            json.dumps({"id": i, "input": f"What is {i} + 1? {suffix if i < marked else ''}", "target": i + 1}) + "\n"
            for i in range(n)
        )
    )
    return str(path)


def single_grid(tmp_path) -> str:
    grid = tmp_path / "g.toml"
    grid.write_text('strategies = ["single"]\nscorer = "numeric"\n')
    return str(grid)


@pytest.mark.slow
def test_arithmetic_across_two_configurations_scores_full_marks_within_the_window(settings, db, tmp_path):
    """200 samples x (react, single) on sim, at most 6 jobs enqueued at a time,
    observed from Redis too: the claims of units not yet recorded."""
    out = tmp_path / "arith"
    seen: list[int] = []
    last = [0.0]

    def observe(progress) -> None:
        if time.monotonic() - last[0] >= 0.2:
            last[0] = time.monotonic()
            sweep_id = Manifest.model_validate_json((out / "sweep.json").read_text()).id
            claims = db.mget(list(db.scan_iter(match=keys.sweep_claim(sweep_id, "*"), count=1000)) or ["-"])
            seen.append(sum(1 for c in claims if c and c != "-" and json.loads(c)["recorded"] is None))

    before = jobs_sent(db)
    outcome = run_sweep(ARITHMETIC, GRID, out, settings=settings, max_in_flight=6, observer=observe)
    assert outcome.total == 400 and jobs_sent(db) - before == 400
    assert 1 < outcome.peak_in_flight <= 6 and max(seen) <= 6
    rows = results(out)
    by_config = Counter(r["config"] for r in rows if r["status"] == "completed" and r["score"] == 1.0)
    assert by_config == {"sim/react": 200, "sim/single": 200}
    report = subprocess.run(
        [sys.executable, "-m", "covey", "sweep-report", str(out), "--json"],
        env=worker_env(settings.redis_url),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    summary = {r["config"]: r for r in json.loads(report.stdout)}
    assert summary["sim/react"]["accuracy"] == 1.0 and summary["sim/single"]["ran"] == 200
    assert summary["sim/react"]["mean_cycles"] == 2 and summary["sim/single"]["mean_cycles"] == 1
    assert (out / "summary.csv").exists() and (out / "summary.png").stat().st_size > 0


def test_a_small_total_cap_stops_the_sweep_at_it_with_the_rest_skipped(settings, db, tmp_path):
    cap = 12_000
    outcome = run_sweep(ARITHMETIC, GRID, tmp_path / "capped", settings=settings, max_in_flight=8, max_tokens_total=cap)
    scope = next(r for r in Client(settings).ledger.scope_rows() if r.name == f"sweep:{outcome.sweep_id}")
    assert outcome.dry and scope.tokens_used <= cap and scope.tokens_reserved == 0
    rows = results(tmp_path / "capped")
    statuses = Counter(r["status"] for r in rows)
    assert set(statuses) == {"completed", "skipped_budget"} and statuses["skipped_budget"] > 200
    assert len({r["unit"] for r in rows}) == 400  # every unit recorded, none dropped
    assert sum(r["usage"]["total_tokens"] for r in rows) <= cap


@pytest.mark.slow
def test_a_killed_sweep_reruns_without_running_any_sample_twice(sweep_redis, sweep_worker, db, tmp_path):
    data, out = dataset(tmp_path, 40, "[sim:latency 100]"), tmp_path / "killed"
    args = ("sweep", data, "--grid", str(GRID), "--out", str(out), "--max-in-flight", "4")
    before = jobs_sent(db)
    first = covey(sweep_redis, *args)
    deadline = time.monotonic() + 120
    while not (out / "results.jsonl").exists() or len(results(out)) < 16:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first submitter did not record 16 results within 120 s"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)  # no goodbye: its lease lapses on its own
    first.wait()
    assert len({r["unit"] for r in results(out)}) < 80
    second = covey(sweep_redis, *args)
    stdout, stderr = second.communicate(timeout=120)
    assert second.returncode == 0, stderr
    rows = results(out)
    assert jobs_sent(db) - before == 80  # 40 samples x 2 configurations, each run once
    completed = [r for r in rows if r["status"] == "completed"]
    assert len(completed) == 80 and len({r["unit"] for r in completed}) == 80
    assert len({r["job_id"] for r in completed}) == 80
    adopted = int(stdout.split(" adopted")[0].rsplit(", ", 1)[1])
    assert adopted >= 1  # the killed submitter's jobs in flight were followed, not run again


def test_two_submitters_on_one_directory_split_the_work(sweep_redis, sweep_worker, db, tmp_path):
    data, out = dataset(tmp_path, 30, "[sim:latency 50]"), tmp_path / "shared"
    grid = tmp_path / "g.toml"
    grid.write_text('strategies = ["single"]\nscorer = "numeric"\n')
    args = ("sweep", data, "--grid", str(grid), "--out", str(out), "--max-in-flight", "3")
    before = jobs_sent(db)
    both = [covey(sweep_redis, *args), covey(sweep_redis, *args)]
    for proc in both:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    rows = results(out)
    assert jobs_sent(db) - before == 30  # neither started a sweep of its own in the new directory
    assert sorted(r["sample_id"] for r in rows) == sorted(str(i) for i in range(30))  # each recorded once


def test_a_model_judge_scores_as_a_job_under_the_same_cap(settings, db, tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("strategies: [single]\nscorer: {kind: model, model: sim}\n")
    outcome = run_sweep(
        dataset(tmp_path, 4),
        load_grid(grid),
        tmp_path / "judged",
        settings=settings,
        max_in_flight=2,
        max_tokens_total=1_000_000,
    )
    rows = results(tmp_path / "judged")
    assert outcome.submitted == 8 and outcome.peak_in_flight <= 2  # 4 samples + 4 judges
    assert all(r["score"] == 1.0 and r["judge_tokens"] > 0 and r["judge_job_id"] for r in rows)
    scope = next(r for r in Client(settings).ledger.scope_rows() if r.name == f"sweep:{outcome.sweep_id}")
    assert scope.tokens_used == sum(r["usage"]["total_tokens"] + r["judge_tokens"] for r in rows)


def test_a_malformed_dataset_line_is_refused_naming_it_and_nothing_runs(sweep_redis, db, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "input": "What is 1 + 1?", "target": 2}\n{"id": 2, "input": "What is\n')
    before = jobs_sent(db)
    proc = covey(sweep_redis, "sweep", str(path), "--grid", str(GRID), "--out", str(tmp_path / "never"))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert stderr.strip().splitlines()[-1].startswith("Error: bad.jsonl line 2: not valid JSON")
    assert jobs_sent(db) == before and not (tmp_path / "never").exists()


def test_rate_limited_jobs_narrow_the_window_and_are_retried(sweep_redis, db, tmp_path):
    """On a worker whose SDK does not retry, ``[sim:fail 429]`` fails each attempt with HTTP 429."""
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "covey",
            "worker",
            "--concurrency",
            "2",
            "--queues",
            "covey-429",
            "--loglevel",
            "warning",
        ],
        env=worker_env(sweep_redis.url, COVEY_MODEL_RETRIES="0", COVEY_QUEUE="covey-429"),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        settings = Settings(redis_url=sweep_redis.url, queue="covey-429")
        wait_for_worker(Client(settings), worker)
        outcome = run_sweep(
            dataset(tmp_path, 12, "[sim:fail 429]", first=4),
            single_grid(tmp_path),
            tmp_path / "limited",
            settings=settings,
            queue="covey-429",
            max_in_flight=8,
            retries=1,
        )
    finally:
        stop_worker(worker)
    assert outcome.window_low < 8
    latest = {r["sample_id"]: r for r in results(tmp_path / "limited")}
    assert all(latest[str(i)]["status"] == "failed" and latest[str(i)]["attempt"] == 2 for i in range(4))
    assert all(
        latest[str(i)]["cause"]["kind"] == "rate_limited" and latest[str(i)]["cause"]["status"] == 429 for i in range(4)
    )
    assert all(latest[str(i)]["status"] == "completed" for i in range(4, 12))


def test_a_sweep_with_samples_that_did_not_complete_says_how_many_and_exits_1(sweep_redis, sweep_worker, tmp_path):
    data, grid = dataset(tmp_path, 5, "[sim:fail 500]", first=2), single_grid(tmp_path)
    proc = covey(sweep_redis, "sweep", data, "--grid", grid, "--out", str(tmp_path / "out"))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert stdout.strip().splitlines()[-1] == "2 of 5 units did not complete (2 failed)"


def test_labelled_budgets_and_model_params_name_short_configurations(sweep_redis, sweep_worker, tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text(
        'strategies = ["single"]\nscorer = "numeric"\nmodel_params = {temperature = 0.2, seed = 7}\n'
        'budgets = [{max_tokens = 20000, max_cycles = 6, seconds = 120, label = "small"},\n'
        "  {max_tokens = 40000, max_cycles = 6, seconds = 120}]\n"
    )
    proc = covey(sweep_redis, "sweep", dataset(tmp_path, 3), "--grid", str(grid), "--out", str(tmp_path / "out"))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert {r["config"] for r in results(tmp_path / "out")} == {"default/single/small", "default/single/tok=40k"}
    table = [line for line in stdout.splitlines() if line.startswith(("configuration", "default/"))]
    assert len(table) == 3 and max(len(line) for line in table) < 120


def test_several_scorers_are_reported_side_by_side(sweep_redis, sweep_worker, tmp_path):
    grid = tmp_path / "g.toml"
    grid.write_text('strategies = ["single"]\nscorer = ["numeric", {kind = "exact", name = "verbatim"}]\n')
    out = tmp_path / "out"
    proc = covey(sweep_redis, "sweep", dataset(tmp_path, 3), "--grid", str(grid), "--out", str(out))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert all(set(r["scores"]) == {"numeric", "verbatim"} and r["score"] == 1.0 for r in results(out))
    header = stdout.splitlines()[1].split()
    assert header[:4] == ["configuration", "accuracy", "numeric", "verbatim"]
    assert "score_numeric" in (out / "summary.csv").read_text().splitlines()[0]


@pytest.mark.slow
def test_limit_shuffle_and_sample_ids_choose_the_samples_a_run_takes(sweep_redis, sweep_worker, tmp_path):
    data, grid = dataset(tmp_path, 10), single_grid(tmp_path)

    def ran(out: str, *selection: str) -> list[str]:
        proc = covey(sweep_redis, "sweep", data, "--grid", grid, "--out", str(tmp_path / out), *selection)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        return [r["sample_id"] for r in results(tmp_path / out)]

    assert sorted(ran("ids", "--sample-id", "7", "--sample-id", "2")) == ["2", "7"]
    first = ran("a", "--shuffle", "5", "--limit", "3")
    assert len(first) == 3 and sorted(first) != ["0", "1", "2"]  # seed 5 takes others than the first three
    assert sorted(ran("b", "--shuffle", "5", "--limit", "3")) == sorted(first)  # the seed picks the same ones
    assert sorted(ran("a"), key=int) == [str(i) for i in range(10)]  # a full rerun runs only the other 7


def running_sweep(sweep_redis, data: str, out) -> tuple[subprocess.Popen, tuple[str, ...]]:
    """``covey sweep`` of ``data`` on the example grid, four in flight, once it has recorded a unit."""
    args = ("sweep", data, "--grid", str(GRID), "--out", str(out), "--max-in-flight", "4")
    proc = covey(sweep_redis, *args, preexec_fn=default_ctrl_c)
    deadline = time.monotonic() + 120
    while not (out / "results.jsonl").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the sweep recorded no unit within 120 s"
        time.sleep(0.05)
    return proc, args


@pytest.mark.slow
def test_ctrl_c_on_a_sweep_says_its_jobs_go_on_and_how_to_resume_and_exits_130(sweep_redis, sweep_worker, tmp_path):
    out = tmp_path / "stopped"
    # Long enough (80 units, 4 at a time) that a test runner slowed by a busy machine signals it mid-run.
    proc, args = running_sweep(sweep_redis, dataset(tmp_path, 40, "[sim:latency 300]"), out)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == (
        "interrupted: the sweep's jobs in flight go on: rerun the same command to resume (it follows them), "
        f"or stop them with `covey sweep-cancel {out}`"
    )
    again = covey(sweep_redis, *args)
    _, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stderr
    assert len({r["unit"] for r in results(out) if r["status"] == "completed"}) == 80


@pytest.mark.slow
def test_sweep_cancel_stops_a_running_sweep_which_reports_it_and_exits_1_and_a_rerun_resumes(
    sweep_redis, sweep_worker, db, tmp_path
):
    out = tmp_path / "cancelled"
    proc, args = running_sweep(sweep_redis, dataset(tmp_path, 40, "[sim:latency 300]"), out)
    cancel = covey(sweep_redis, "sweep-cancel", str(out))
    said, _ = cancel.communicate(timeout=60)
    assert cancel.returncode == 0
    sweep_id = Manifest.model_validate_json((out / "sweep.json").read_text()).id
    assert said.startswith(f"sweep {sweep_id} cancelled: ")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    recorded = {r["unit"] for r in results(out)}
    assert stdout.strip().splitlines()[-1] == (
        f"sweep {sweep_id} cancelled: {80 - len(recorded)} of 80 units not run; rerun the same command to resume them"
    )
    assert 0 < len(recorded) < 80
    claims = [json.loads(db.get(k)) for k in db.scan_iter(match=keys.sweep_claim(sweep_id, "*"))]
    assert len(claims) == len(recorded) and all(c["recorded"] for c in claims), "a job left running unrecorded"
    again = covey(sweep_redis, *args)
    _, stderr = again.communicate(timeout=180)
    latest = {r["unit"]: r["status"] for r in results(out)}
    assert len(latest) == 80, stderr
    assert again.returncode == (1 if "cancelled" in latest.values() else 0), stderr


@pytest.mark.slow
def test_a_piped_sweep_prints_its_last_progress_line_once(sweep_redis, sweep_worker, tmp_path):
    data, grid, out = dataset(tmp_path, 3), single_grid(tmp_path), str(tmp_path / "out")
    for _ in range(2):  # the rerun finds every unit done at its first look
        proc = covey(sweep_redis, "sweep", data, "--grid", grid, "--out", out)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    progress = [line for line in stderr.splitlines() if " done, " in line]
    assert len(progress) == 1 and progress[0].startswith("3/3 done"), stderr


def test_retries_are_in_the_results_and_the_live_line_counts_samples_not_attempts(sweep_redis, sweep_worker, tmp_path):
    """On the default worker the SDK retries a 429 (which ``[sim:fail 429]`` answers only
    the first attempt of) and a 500 (which it answers every time) twice; ``--retries 1``
    runs the failed sample once more."""
    data = tmp_path / "d.jsonl"
    inputs = ["What is 1 + 1? [sim:fail 500]", "What is 2 + 1? [sim:fail 429]", "What is 3 + 1?", "What is 4 + 1?"]
    data.write_text("".join(json.dumps({"id": i, "input": t, "target": i + 2}) + "\n" for i, t in enumerate(inputs)))
    out = tmp_path / "out"
    proc = covey(sweep_redis, "sweep", str(data), "--grid", single_grid(tmp_path), "--out", str(out), "--retries", "1")
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 1, stderr
    lines = results(out)
    failed = [(r["attempt"], r["status"], r["cause"]["retries"]) for r in lines if r["sample_id"] == "0"]
    assert failed == [(1, "failed", 2), (2, "failed", 2)]  # each attempt after the SDK's two retries
    completed = {r["sample_id"]: r["usage"]["model_retries"] for r in lines if r["status"] == "completed"}
    assert completed == {"1": 1, "2": 0, "3": 0}
    progress = [line for line in stderr.splitlines() if " done, " in line]
    assert progress[-1].startswith("3/4 done, 1 failed, 0 skipped, accuracy 75.0% | "), stderr


def test_a_copied_results_directory_runs_as_a_sweep_of_its_own_leaving_the_originals_cap(
    sweep_redis, sweep_worker, db, tmp_path
):
    data, grid, original, copy = dataset(tmp_path, 3), single_grid(tmp_path), tmp_path / "a", tmp_path / "b"
    proc = covey(sweep_redis, "sweep", data, "--grid", grid, "--out", str(original), "--max-tokens-total", "100000")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    first = Manifest.model_validate_json((original / "sweep.json").read_text())
    ledger = Client(Settings(redis_url=sweep_redis.url)).ledger

    def row(sweep_id: str):
        return next(r for r in ledger.scope_rows() if r.name == f"sweep:{sweep_id}")

    spent = row(first.id)
    assert spent.tokens_used > 0 and spent.tokens_limit == 100000
    shutil.copytree(original, copy)
    cancel = covey(sweep_redis, "sweep-cancel", str(copy))
    _, stderr = cancel.communicate(timeout=60)
    assert cancel.returncode == 2
    assert stderr.strip() == f"Error: {copy} is a copy of {original}, where sweep {first.id} runs: cancel it there"
    before = jobs_sent(db)
    proc = covey(sweep_redis, "sweep", data, "--grid", grid, "--out", str(copy), "--max-tokens-total", "50")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert (
        f"{copy} is a copy of {original} (sweep {first.id}): it runs as a new sweep, with a cap of its own, "
        "keeping the results it holds"
    ) in stderr.splitlines()
    second = Manifest.model_validate_json((copy / "sweep.json").read_text())
    assert second.id != first.id and second.copy_of == first.id
    assert jobs_sent(db) == before  # the copy's three results are kept
    assert row(first.id) == spent and row(second.id).tokens_limit == 50  # the original's cap neither shared nor reset


def test_a_finished_sweep_is_rescored_from_its_recorded_outputs_without_redis(sweep_redis, sweep_worker, tmp_path):
    """Targets written ``N.0`` fail the grid's ``exact`` scorer; ``numeric`` re-scores them right."""
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"id": i, "input": f"What is {i} + 1?", "target": f"{i + 1}.0"}) + "\n" for i in range(3))
    )
    grid, out = tmp_path / "g.toml", tmp_path / "out"
    grid.write_text('strategies = ["single"]\nscorer = {kind = "includes", name = "mentions"}\n')
    proc = covey(sweep_redis, "sweep", str(data), "--grid", str(grid), "--out", str(out))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    recorded = (out / "results.jsonl").read_bytes()
    unreachable = "redis://127.0.0.1:1/0"  # nothing listens there: a report that used Redis would fail

    def report(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "covey", "sweep-report", str(out), *args],
            env=worker_env(unreachable),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = report("--scorer", "numeric", "--scorer", "mentions", "--scorer", "exact")
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[1].split(), done.stdout.splitlines()[2].split()
    assert header[:5] == ["configuration", "accuracy", "exact", "mentions", "numeric"]
    assert row[:7] == ["default/single", "100.0%", "±", "0.0%", "0.0%", "0.0%", "100.0%"]
    csv_header, csv_row = (out / "summary.csv").read_text().splitlines()[:2]
    assert dict(zip(csv_header.split(","), csv_row.split(",")))["score_numeric"] == "1.0"
    rows = json.loads(report("--scorer", "exact", "--json").stdout)
    assert rows[0]["accuracy"] == 0.0
    unknown = report("--scorer", "numerc")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "Error: unknown scorer 'numerc': use one of exact, includes, regex, numeric, mentions, or module:function"
    )
    assert (out / "results.jsonl").read_bytes() == recorded


def test_epochs_run_each_sample_that_many_times_and_the_report_names_its_scorer(sweep_redis, sweep_worker, tmp_path):
    out = tmp_path / "epochs"
    args = ("sweep", dataset(tmp_path, 2), "--grid", single_grid(tmp_path), "--out", str(out), "--json")
    proc = covey(sweep_redis, *args, "--epochs", "3")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    done = Counter(r["sample_id"] for r in results(out) if r["status"] == "completed")
    assert done == {"0": 3, "1": 3}
    (row,) = json.loads(stdout)
    assert (row["units"], row["accuracy"], row["scorer"]) == (6, 1.0, "numeric")
    refused = covey(sweep_redis, *args[:-1], "--epochs", "1001")
    assert refused.communicate(timeout=60)[1].strip().endswith("--epochs 1001: give 1 to 1000 runs of each sample")
    assert refused.returncode == 2
