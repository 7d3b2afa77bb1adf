"""Property tests at the doors a user reaches: generated CLI options and generated
wire specs. Examples are few: each is a CLI process or a job on the real worker.

The CLI exits 0 or 2 with one line, never a traceback; a spec sent by a bare
Celery client either runs to a result with a status or fails with ``InvalidSpec``,
and the worker is still there afterwards.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from covey.status import AgentStatus
from tests.integration.conftest import ROOT, worker_env
from tests.test_properties import EDGE_FLOATS, EDGE_INTS, spec_data, valid_spec_data

FEW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# What a user types: numbers at the edges, arbitrary numbers, any text (argv holds no NUL).
typed = st.one_of(
    st.sampled_from([str(n) for n in EDGE_INTS] + [repr(f) for f in EDGE_FLOATS] + ["1e308", "-0", "none", ""]),
    st.integers().map(str),
    st.floats().map(repr),
    st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=12),
)
OPTIONS = [
    "--max-tokens",
    "--max-cycles",
    "--max-agents",
    "--max-depth",
    "--max-call-tokens",
    "--agent-max-cycles",
    "--timeout",
    "--tenant",
    "--tools",
    "--role",
]


@pytest.fixture(scope="module")
def submit(redis_server):
    """``covey submit`` to a queue no worker reads: what is checked is the door, not the run."""
    env = worker_env(redis_server.url, COVEY_QUEUE="properties-nobody-reads")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "covey", "submit", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            check=False,
        )

    return run


@FEW
@given(options=st.dictionaries(st.sampled_from(OPTIONS), typed, min_size=1, max_size=3))
@pytest.mark.slow
def test_generated_cli_options_exit_0_or_2_in_one_line(submit, options):
    proc = submit("What is 1 + 1?", *(f"{option}={value}" for option, value in options.items()))
    event(f"exit {proc.returncode}")
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 2:
        assert proc.stderr.startswith(("Error: ", "Usage: ")), proc.stderr
        assert proc.stderr.count("Error: ") == 1
    else:
        assert len(proc.stdout.split()) == 1  # the job id


STATUSES = {s.value for s in AgentStatus if s.final}


@settings(FEW, max_examples=20)
@given(spec=st.one_of(valid_spec_data, spec_data))
def test_generated_wire_specs_run_or_are_refused_and_the_worker_lives(bare, spec):
    sent = bare.send_task("covey.run_job", kwargs={"spec": spec})
    outcome = sent.get(timeout=60, propagate=False)
    event(sent.state)  # hypothesis --hypothesis-show-statistics: how many ran, how many were refused
    if sent.state == "SUCCESS":
        assert outcome["status"] in STATUSES and outcome["job_id"] == sent.id
    else:
        assert sent.state == "FAILURE"
        assert type(outcome).__name__ == "InvalidSpec", repr(outcome)
        assert str(outcome).startswith("invalid job spec: ")
    assert bare.control.ping(timeout=5, limit=1), "the worker stopped answering"
