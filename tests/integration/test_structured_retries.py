"""An off-schema reply is asked again, through the real CLI, worker and Redis."""

from __future__ import annotations

import pytest

from tests.integration.test_jobs import run_json


@pytest.mark.parametrize("strategy, answer", [("plan_execute", "42"), ("lats", "42"), ("orchestrate", "42")])
def test_a_first_off_schema_reply_is_asked_again_and_the_job_completes(cli, client, strategy, answer):
    proc, result = run_json(cli, "What is 6 * 7? [sim:fail bad_json once]", "--strategy", strategy)
    assert proc.returncode == 0, proc.stderr
    assert (result["status"], result["output"]) == ("completed", answer)
    root = next(n for n in client.job(result["job_id"]).tree() if n.depth == 0)
    assert root.usage.cycles >= 2  # the off-schema ask and the one asked again, both paid for


def test_an_endpoint_that_stays_off_schema_fails_the_job_saying_why(cli):
    proc, result = run_json(cli, "What is 6 * 7? [sim:fail bad_json]", "--strategy", "plan_execute")
    assert (proc.returncode, result["status"]) == (1, "failed")
    assert "does not match the schema" in result["error"]
