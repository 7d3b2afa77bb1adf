"""``covey jobs`` and ``covey retry`` through the real CLI and worker, on the jobs of
one tenant of their own (the session's Redis holds every other test's jobs too)."""

from __future__ import annotations

import json
import uuid

import pytest


def rows(cli, *args: str) -> list[dict]:
    proc = cli("jobs", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_jobs_lists_the_newest_first_filtered_by_status_and_tenant_and_retry_sends_one_again(cli):
    tenant = f"t{uuid.uuid4().hex[:8]}"
    assert cli("scope", f"tenant:{tenant}", "--max-tokens", "1000000").returncode == 0
    done = cli("run", "What is 6 * 7?", "--tenant", tenant, "--json")
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)["job_id"]
    failed = cli("submit", "[sim:fail 500] What is 1 + 1?", "--tenant", tenant).stdout.strip()
    assert cli("result", failed).returncode == 1  # waits until it has ended

    listed = rows(cli, "--tenant", tenant)
    assert [(r["job_id"], r["status"], r["tenant"]) for r in listed] == [
        (failed, "failed", tenant),
        (first, "completed", tenant),
    ]
    assert listed[1]["task"] == "What is 6 * 7?" and listed[1]["strategy"] == "react"
    assert [r["job_id"] for r in rows(cli, "--tenant", tenant, "--status", "completed")] == [first]
    assert [r["job_id"] for r in rows(cli, "--tenant", tenant, "--status", "failed", "--status", "running")] == [failed]
    assert [r["job_id"] for r in rows(cli, "--tenant", tenant, "--limit", "1")] == [failed]
    table = cli("jobs", "--tenant", tenant).stdout.splitlines()
    assert table[0].split()[:3] == ["job", "status", "submitted"] and table[1].startswith(failed)

    again = cli("retry", first)
    assert again.returncode == 0, again.stderr
    retried = again.stdout.strip()
    assert retried not in (first, failed)
    result = json.loads(cli("result", retried, "--json").stdout)
    assert (result["status"], result["output"]) == ("completed", "42")
    assert rows(cli, "--tenant", tenant, "--limit", "1")[0]["job_id"] == retried


def test_retrying_an_unknown_job_or_listing_a_prefixed_tenant_is_one_clear_line(cli):
    unknown = cli("retry", "no-such-job")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == (
        "Error: unknown job no-such-job: no spec recorded (never submitted by covey, expired, or lost with its records)"
    )
    prefixed = cli("jobs", "--tenant", "tenant:acme")
    assert prefixed.returncode == 2 and "give the name without its prefix: 'acme'" in prefixed.stderr
