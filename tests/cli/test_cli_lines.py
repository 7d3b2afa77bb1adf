"""Mistakes a newcomer makes at the command line, each answered in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from covey import Client
from covey.config.settings import Settings
from tests.cli.test_cli import covey
from tests.redis_server import refusing_port


def one_line(proc, code: int) -> str:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    return proc.stderr.strip()


def test_watching_the_tree_of_an_unknown_job_says_so_instead_of_redrawing(redis_server):
    line = one_line(covey("tree", "no-such-job", "--watch", redis_url=redis_server.url), 1)
    assert line.startswith("Error: unknown job no-such-job")


@pytest.mark.parametrize("command", [("status", "j"), ("submit", "x"), ("worker",)])
def test_a_redis_url_without_a_scheme_is_one_line_saying_how_to_write_it(command):
    line = one_line(covey(*command, redis_url="localhost:6379"), 2)
    assert line == (
        "Error: invalid configuration: redis_url: 'localhost:6379' has no scheme: "
        "write it as redis://localhost:6379/0 (or rediss, unix, sentinel)"
    )


@pytest.mark.parametrize("command", [("jobs",), ("status", "j"), ("submit", "x"), ("worker",)])
def test_a_misspelt_scheme_is_one_line_suggesting_the_right_one(command):
    line = one_line(covey(*command, redis_url="redsi://127.0.0.1:6379/0"), 2)
    assert line == (
        "Error: invalid configuration: redis_url: unknown scheme redsi://, not one of redis, rediss, unix, "
        "sentinel; did you mean redis://?"
    )


def test_a_misspelt_scheme_is_a_covey_error_in_python(monkeypatch):
    from covey import Client, CoveyError
    from covey.config.settings import get_settings

    monkeypatch.setenv("COVEY_REDIS_URL", "redsi://127.0.0.1:6379/0")
    get_settings.cache_clear()
    try:
        with pytest.raises(CoveyError, match="unknown scheme redsi://"):
            Client()
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize("command", [("jobs",), ("status", "j"), ("submit", "x"), ("worker",)])
def test_a_database_the_redis_has_not_is_one_line(redis_server, command):
    url = redis_server.url.rsplit("/", 1)[0] + "/99"
    line = one_line(covey(*command, redis_url=url), 2)
    assert line == (
        f"Error: cannot reach Redis ({url}): DB index is out of range: "
        "its URL names a database this Redis has not (16 by default, 0-15)"
    )


@pytest.mark.parametrize("server", ["flower", "ui", "sim-server"])
def test_a_server_on_a_busy_port_is_one_line_naming_it(redis_server, server):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        line = one_line(covey(server, "--port", str(port), redis_url=redis_server.url), 2)
    assert line.startswith(f"Error: --port {port}: 127.0.0.1:{port} is in use")
    assert line.endswith("give another --port")


def test_a_worker_whose_metrics_port_is_busy_is_one_line_naming_it_and_leaves_nothing(redis_server, tmp_path):
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = covey("worker", "--metrics-port", str(port), redis_url=redis_server.url, TMPDIR=str(tmp_path))
        line = one_line(started, 2)  # bad input, as flower's busy port
    assert line == f"Error: --metrics-port {port}: Address already in use; give another --metrics-port"
    assert list(tmp_path.iterdir()) == []  # its samples' folder went with it


def test_a_tenant_given_with_its_scope_prefix_is_told_to_drop_it(redis_server):
    line = one_line(covey("submit", "x", "--tenant", "tenant:acme", redis_url=redis_server.url), 2)
    assert line.endswith("tenant: give the name without its prefix: 'acme'")


@pytest.mark.parametrize(
    "env, said",
    [
        ({}, "Error: invalid configuration: a sentinel:// URL needs COVEY_REDIS_MASTER"),
        ({"COVEY_REDIS_MASTER": "covey"}, "Error: cannot reach Redis (sentinel://127.0.0.1:"),
    ],
)
def test_a_sentinel_url_without_its_master_or_its_sentinels_is_one_line(env, said):
    with refusing_port() as first, refusing_port() as second:
        url = f"sentinel://127.0.0.1:{first};sentinel://127.0.0.1:{second}"
        line = one_line(covey("status", "j", redis_url=url, **env), 2)
    assert line.startswith(said)


SWEEP = ("sweep", "examples/arithmetic.jsonl", "--grid", "examples/arithmetic.toml")


@pytest.mark.parametrize("flag", ["--max-tokens-total", "--max-cycles-total"])
def test_a_sweep_cap_no_ledger_can_hold_is_refused_before_anything_is_written(redis_server, tmp_path, flag):
    out = tmp_path / "out"
    line = covey(*SWEEP, "--out", str(out), flag, "99999999999999999999999", redis_url=redis_server.url)
    assert line.returncode == 2 and "Traceback" not in line.stderr
    assert line.stderr.strip().endswith("is not in the range 1<=x<=9007199254740991.")
    assert not out.exists()


def test_a_sweep_out_folder_that_cannot_be_made_is_one_line(redis_server):
    line = one_line(covey(*SWEEP, "--out", "/proc/nope", redis_url=redis_server.url), 2)
    assert line == "Error: --out /proc/nope: No such file or directory"


def test_a_task_from_standard_input_or_a_file_drops_its_line_ends(redis_server, tmp_path):
    path = tmp_path / "task.txt"
    path.write_text("What is 6 * 7?\n\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}, "COVEY_REDIS_URL": redis_server.url}
    ids = []
    for args, given in ((["-"], "What is 6 * 7?\n"), (["--task-file", str(path)], None)):
        sent = subprocess.run(
            [sys.executable, "-m", "covey", "submit", *args], input=given, env=env, capture_output=True, text=True
        )
        assert sent.returncode == 0, sent.stderr
        ids.append(sent.stdout.strip())
    client = Client(Settings(redis_url=redis_server.url))
    try:
        assert [client.index.submission(job_id).spec["task"] for job_id in ids] == ["What is 6 * 7?"] * 2
    finally:
        client.close()


def test_a_task_too_large_or_not_utf8_is_one_line_naming_the_bound_or_the_byte(redis_server, tmp_path):
    line = one_line(covey("submit", "--task-file", "/dev/zero", redis_url=redis_server.url), 2)
    assert line == "Error: --task-file /dev/zero: larger than 4 MiB, the most covey reads of it"
    task = tmp_path / "task.txt"
    task.write_bytes(b"What is 6 \xd7 7?")  # Latin-1's multiplication sign
    line = one_line(covey("submit", "--task-file", str(task), redis_url=redis_server.url), 2)
    assert line == f"Error: --task-file {task}: not UTF-8 text: byte 0xd7 at offset 10"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}, "COVEY_REDIS_URL": redis_server.url}
    with open("/dev/zero", "rb") as endless:
        run = subprocess.run(
            [sys.executable, "-m", "covey", "run", "-"], stdin=endless, env=env, capture_output=True, text=True
        )
    assert one_line(run, 2) == "Error: standard input: larger than 4 MiB, the most covey reads of it"


def test_a_models_file_too_large_or_not_utf8_is_one_line(redis_server, tmp_path):
    line = one_line(covey("worker", redis_url=redis_server.url, COVEY_MODELS="/dev/zero"), 2)
    assert line == "Error: invalid models file /dev/zero: larger than 1 MiB, the most covey reads of it"
    models = tmp_path / "models.toml"
    models.write_bytes(b'[models.local]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "caf\xe9"\n')
    line = one_line(covey("worker", redis_url=redis_server.url, COVEY_MODELS=str(models)), 2)
    assert line == f"Error: invalid models file {models}: not UTF-8 text: byte 0xe9 at offset 62"


def test_a_dataset_not_utf8_or_with_a_line_too_long_is_one_line(redis_server, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_bytes(b'{"id": 1, "input": "What is 1 + 1?", "target": 2}\n{"id": 2, "input": "caf\xe9", "target": 3}\n')
    out = str(tmp_path / "out")
    line = one_line(covey(*SWEEP[:1], str(data), *SWEEP[2:], "--out", out, redis_url=redis_server.url), 2)
    assert line == "Error: data.jsonl: not UTF-8 text: byte 0xe9 at offset 73"
    data.write_bytes(b'{"id": 1, "input": "' + b"x" * (4 << 20) + b'", "target": 2}\n')
    line = one_line(covey(*SWEEP[:1], str(data), *SWEEP[2:], "--out", out, redis_url=redis_server.url), 2)
    assert line == "Error: data.jsonl line 1: longer than 4 MiB, the most covey reads of a line"
