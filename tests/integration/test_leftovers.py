"""A run of the suite leaves nothing in the system's temporary directory: no worker
log, no Redis directory, no socket."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.conftest import ROOT


@pytest.mark.slow
def test_a_run_with_a_worker_leaves_nothing_in_the_temporary_directory(tmp_path):
    temp, base = tmp_path / "temp", tmp_path / "pytest"
    temp.mkdir()
    env_tmp = {"TMPDIR": str(temp)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={base}",
            "tests/integration/test_job_list.py::test_retrying_an_unknown_job_or_listing_a_prefixed_tenant_is_one_clear_line",
        ],
        env={**_environ(), **env_tmp},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert sorted(p.name for p in temp.iterdir()) == []


def _environ() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("COVEY_")}
