"""Bad input at the CLI gets one clear line, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.redis_server import RedisServer, refusing_port


def covey(*args, redis_url, **settings: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update(COVEY_REDIS_URL=redis_url, **settings)
    return subprocess.run([sys.executable, "-m", "covey", *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args", [("submit", "x"), ("tree", "j"), ("ledger", "j"), ("cancel", "j"), ("status", "j"), ("scope", "global")]
)
def test_an_unreachable_redis_is_one_clear_line(args):
    with refusing_port() as port:
        url = f"redis://127.0.0.1:{port}/0"
        proc = covey(*args, redis_url=url)
    assert proc.returncode == 2
    assert proc.stderr.strip() == proc.stderr.strip().splitlines()[0]
    assert proc.stderr.startswith(f"Error: cannot reach Redis ({url})")


@pytest.mark.parametrize(
    "args, named",
    [
        (("run", "x", "--max-depth", "-1"), "--max-depth"),
        (("submit", "x", "--max-agents", "-2"), "--max-agents"),
        (("submit", "x", "--tenant", "no spaces"), "tenant"),
        (("submit", "x", "--timeout", "0"), "--timeout"),
        (("scope", "global", "--max-tokens", "-1"), "--max-tokens"),
        (("scope", "tenant:no spaces", "--max-tokens", "5"), "NAME"),
        (("worker", "--concurrency", "0"), "--concurrency"),
        (("worker", "--processes", "0"), "--processes"),
        (("worker", "--processes", "1000"), "--processes"),
        (("demo", "--width", "0"), "--width"),
    ],
)
def test_bad_options_are_refused_naming_them(redis_server, args, named):
    proc = covey(*args, redis_url=redis_server.url)
    assert proc.returncode == 2
    assert named in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["tree", "ledger"])
def test_an_unknown_job_is_said_so(redis_server, command):
    proc = covey(command, "no-such-job", redis_url=redis_server.url)
    assert proc.returncode == 1
    assert "no-such-job" in proc.stderr and "unknown" in proc.stderr


@pytest.mark.parametrize("command", ["result", "cancel"])
def test_waiting_on_or_cancelling_an_unknown_job_is_refused(redis_server, command):
    proc = covey(command, "no-such-job", redis_url=redis_server.url)
    assert proc.returncode == 1
    assert "unknown job no-such-job" in proc.stderr
    status = covey("status", "no-such-job", redis_url=redis_server.url)
    assert (status.returncode, status.stdout.strip()) == (1, "unknown")


def test_a_bad_setting_is_one_clear_line(redis_server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
    env.update(COVEY_REDIS_URL=redis_server.url, COVEY_MAX_DEPTH="deep")
    proc = subprocess.run([sys.executable, "-m", "covey", "status", "j"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: invalid configuration: max_depth:")


def test_scope_changes_only_the_caps_given(redis_server):
    name = "tenant:cli-scope"
    assert covey("scope", name, redis_url=redis_server.url).returncode == 1  # nothing to show yet
    covey("scope", name, "--max-tokens", "1000", redis_url=redis_server.url)
    covey("scope", name, "--max-cycles", "10", redis_url=redis_server.url)
    covey("scope", name, "--tokens-per-minute", "600", redis_url=redis_server.url)
    shown = covey("scope", name, redis_url=redis_server.url)
    assert shown.returncode == 0
    assert shown.stdout.splitlines()[1].split() == [name, "0", "1000", "-", "-", "0", "10", "600", "-", "0", "1"]
    covey("scope", name, "--max-running", "3", redis_url=redis_server.url)
    removed = covey("scope", name, "--max-tokens", "none", redis_url=redis_server.url)
    assert removed.stdout.splitlines()[1].split() == [name, "0", "-", "-", "-", "0", "10", "600", "-", "0/3", "1"]
    uncapped = covey("scope", name, "--max-running", "none", redis_url=redis_server.url)
    assert uncapped.stdout.splitlines()[1].split() == [name, "0", "-", "-", "-", "0", "10", "600", "-", "0", "1"]
    priced = covey("scope", name, "--max-cost", "2.5", redis_url=redis_server.url)
    assert priced.stdout.splitlines()[1].split() == [
        name,
        "0",
        "-",
        "$0.000000",
        "$2.500000",
        "0",
        "10",
        "600",
        "-",
        "0",
        "1",
    ]
    weighted = covey("scope", name, "--weight", "3", redis_url=redis_server.url)
    assert weighted.stdout.splitlines()[0].split()[-1] == "weight"
    assert weighted.stdout.splitlines()[1].split()[-1] == "3"


def test_scope_refuses_a_weight_but_a_tenants_whole_number_from_1(redis_server):
    zero = covey("scope", "tenant:cli-weight", "--weight", "0", redis_url=redis_server.url)
    assert zero.returncode == 2 and "--weight" in zero.stderr and "1<=x<=1000" in zero.stderr
    shared = covey("scope", "global", "--weight", "2", redis_url=redis_server.url)
    assert shared.returncode == 2
    assert "a weight is a tenant's share; give it to a tenant:<name> scope" in shared.stderr


def test_version_is_the_packages(redis_server):
    from importlib.metadata import version

    proc = covey("--version", redis_url=redis_server.url)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"covey, version {version('covey')}")


@pytest.mark.parametrize(
    "args, named",
    [
        (("submit", "x", "--model", ""), "model:"),
        (("submit", "x", "--role", ""), "role:"),
        (("submit", "x", "--tenant", ""), "tenant:"),
        (("submit", "x", "--tools", "calculator,tele port"), "tools:"),  # which exist is the workers' to say
        (("submit",), "give the task as TASK"),
        (("run", "  \n "), "task: only whitespace"),
        (("submit", "x", "--task-file", "/no/such/file"), "--task-file"),
        (("submit", "x", "--strategy", "debate", "--option", "num_debaters=1"), "options.num_debaters"),
        (("submit", "x", "--option", "=3"), "--option"),
        (("submit", "x", "--model-param", "temperature=hot"), "model_params.temperature"),
    ],
)
def test_empty_names_and_missing_tasks_are_refused_at_the_boundary(redis_server, args, named):
    proc = covey(*args, redis_url=redis_server.url)
    assert proc.returncode == 2
    assert named in proc.stderr and "Traceback" not in proc.stderr


def test_scope_global_shows_the_scope_every_job_names_and_that_it_is_not_counted():
    with RedisServer() as server:  # one where no one capped global
        shown = covey("scope", "global", redis_url=server.url)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[1].split()[:3] == ["global", "not", "counted"]
        row = json.loads(covey("scope", "global", "--json", redis_url=server.url).stdout)
        assert (row["name"], row["counted"], row["tokens_limit"]) == ("global", False, None)
        capped = json.loads(covey("scope", "global", "--max-tokens", "1000", "--json", redis_url=server.url).stdout)
        assert (capped["counted"], capped["tokens_limit"]) == (True, 1000)
        assert covey("scope", "tenant:nobody", redis_url=server.url).returncode == 1  # others must be created
