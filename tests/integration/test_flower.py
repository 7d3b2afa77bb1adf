"""Operators watch covey in Flower: tasks named covey.*, readable JSON args, basic auth,
every task of a job found from its id, outcomes told apart in the task list, and the
wire contract driven through Flower's HTTP API."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx2 as httpx
import pytest

from tests.integration.conftest import ROOT, start_flower, stop_worker, worker_env

AUTH = ("ops", "secret")


@pytest.fixture(scope="module")
def flower(redis_server, worker):
    proc, url = start_flower(redis_server.url, ":".join(AUTH))
    deadline = time.monotonic() + 60
    # Flower learns of workers from their events: once it lists one, events flow.
    while not httpx.get(f"{url}/workers", params={"json": 1}, auth=AUTH, timeout=5).json()["data"]:
        if time.monotonic() > deadline:
            stop_worker(proc)
            raise RuntimeError("flower saw no worker events")
        time.sleep(0.2)
    yield url
    stop_worker(proc)


def test_flower_shows_covey_tasks_with_readable_args_behind_auth(flower, client):
    assert httpx.get(f"{flower}/api/tasks", timeout=5).status_code == 401
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] watch me"))
    assert handle.result(timeout=60).ok
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = httpx.get(f"{flower}/api/tasks", params={"taskname": "covey.agent"}, auth=AUTH, timeout=5).json()
        mine = [t for t in tasks.values() if handle.id in str(t.get("kwargs"))]
        if len(mine) == 2 and all(t["state"] == "SUCCESS" for t in mine):
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"flower never showed both children of {handle.id}")
    # readable labels, not the whole context and spec
    assert all(
        re.fullmatch(rf"job={handle.id} agent=root-sub-[0-9a-f]{{8}} role=worker depth=1 task='.*'", t["kwargs"])
        for t in mine
    )
    root = httpx.get(f"{flower}/api/task/info/{handle.id}", auth=AUTH, timeout=5).json()
    assert root["name"] == "covey.run_job"


def _wait_for(fetch, done, what: str, seconds: float = 30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = fetch()
        if done(value):
            return value
        time.sleep(0.3)
    raise AssertionError(f"flower never showed {what}: last saw {value}")


def test_every_task_of_a_job_is_found_from_its_id(flower, client):
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] find us", budget={"max_depth": 2}))
    assert handle.result(timeout=60).ok
    agents = {node.agent_id for node in handle.tree()}

    def found():
        tasks = httpx.get(f"{flower}/api/tasks", params={"search": handle.id}, auth=AUTH, timeout=5).json()
        return {re.search(r"agent=(\S+)", t["kwargs"])[1]: t for t in tasks.values() if t["state"] == "SUCCESS"}

    tasks = _wait_for(found, lambda t: set(t) == agents, f"the agents {sorted(agents)}")
    # the root spawned, and its last step ran as a resume under the job's id: it is still the job's run_job
    assert tasks["root"]["uuid"] == handle.id and tasks["root"]["name"] == "covey.run_job"
    roots = httpx.get(f"{flower}/api/tasks", params={"taskname": "covey.run_job"}, auth=AUTH, timeout=5).json()
    assert handle.id in roots


def test_a_root_that_spawned_reads_as_its_outcome_like_every_row(flower, client):
    # Ten children's summaries make the root's result longer than the 1024 characters Celery's event keeps.
    handle = client.submit(client.spec("[sim:spawn width=10 depth=1] What is 9 * 9?", budget={"max_depth": 2}))
    result = handle.result(timeout=120)
    assert result.ok and len(repr(result.model_dump(mode="json"))) > 1024
    _wait_for(
        lambda: httpx.get(f"{flower}/api/task/info/{handle.id}", auth=AUTH, timeout=5).json(),
        lambda t: t.get("state") == "SUCCESS" and t.get("result", "").startswith("{'status'"),
        f"job {handle.id} done",
    )
    rows = {row["uuid"]: row for row in _page_rows(flower, handle.id)}
    assert rows[handle.id]["name"] == "covey.run_job"
    assert rows[handle.id]["result"] == f"completed: {result.output}"
    children = [row for uuid, row in rows.items() if uuid != handle.id]
    assert len(children) == 10 and all(row["result"].startswith("completed: ") for row in children)


def test_outcomes_differ_at_a_glance_in_the_task_list(flower, client):
    jobs = {
        "completed": client.submit(client.spec("What is 6 * 7?")),
        "failed": client.submit(client.spec("[sim:fail 500] What is 1 + 1?")),
        "budget_exceeded": client.submit(client.spec("What is 2 + 2?", budget={"max_tokens": 50})),
    }
    for status, handle in jobs.items():
        assert handle.result(timeout=60).status == status
    for status, handle in jobs.items():
        # a job that completed reads as SUCCESS, its AgentResult first; one that did not, as FAILURE
        url = f"{flower}/api/task/info/{handle.id}"
        info = _wait_for(
            lambda: httpx.get(url, auth=AUTH, timeout=5).json(),  # noqa: B023 - called at once
            lambda t: t.get("state") in ("SUCCESS", "FAILURE"),
            f"job {handle.id} done",
        )
        if status == "completed":
            assert info["state"] == "SUCCESS" and info["result"].startswith("{'status': 'completed'")
        else:
            assert info["state"] == "FAILURE" and info["exception"].startswith(f"AgentEnded('{status} ("), info
        # the tasks page (its data table) shows `status: output or error`, agent first in kwargs
        row = _page_row(flower, handle.id)
        assert row["kwargs"].startswith("agent=root role=root depth=0 task=") and row["kwargs"].endswith(handle.id)
    assert _page_row(flower, jobs["completed"].id)["result"] == "completed: 42"
    assert _page_row(flower, jobs["failed"].id)["result"].startswith("failed (model_error): model call failed")
    assert _page_row(flower, jobs["budget_exceeded"].id)["result"].startswith("budget_exceeded (budget): ")
    failed = httpx.get(f"{flower}/api/tasks", params={"state": "FAILURE"}, auth=AUTH, timeout=5).json()
    assert {jobs["failed"].id, jobs["budget_exceeded"].id} <= set(failed)  # the Failed filter
    assert "model call failed" in failed[jobs["failed"].id]["exception"]
    assert jobs["completed"].id not in failed


def test_the_failed_filter_lists_exactly_a_jobs_failed_leaf_and_a_tasks_page_links_to_its_job(flower, client):
    handle = client.submit(client.spec("[sim:spawn width=3 depth=1] [sim:fail 500 part=2] What is 2 + 3?"))
    handle.result(timeout=60)
    nodes = handle.tree()
    assert len(nodes) == 4
    failed_agents = {n.agent_id for n in nodes if n.status == "failed"}
    assert len(failed_agents) == 1

    def of_job(tasks: dict) -> dict[str, dict]:
        return {t["uuid"]: t for t in tasks.values() if f"job={handle.id}" in str(t.get("kwargs"))}

    every = _wait_for(
        lambda: of_job(httpx.get(f"{flower}/api/tasks", auth=AUTH, timeout=5).json()),
        lambda tasks: len(tasks) == 4 and all(t["state"] in ("SUCCESS", "FAILURE") for t in tasks.values()),
        f"job {handle.id}'s four tasks done",
    )
    failed = of_job(httpx.get(f"{flower}/api/tasks", params={"state": "FAILURE"}, auth=AUTH, timeout=5).json())
    assert {re.search(r"agent=(\S+)", t["kwargs"])[1] for t in failed.values()} == failed_agents
    assert all(t["state"] == "SUCCESS" for uuid, t in every.items() if uuid not in failed)
    [leaf] = failed
    page = httpx.get(f"{flower}/task/{leaf}", auth=AUTH, timeout=5)
    assert page.status_code == 200
    link = re.search(r'<a class="covey-job" href="([^"]+)">', page.text)
    assert link is not None and link[1] == f"http://127.0.0.1:8600/jobs/{handle.id}", page.text[:2000]


def _page_row(flower: str, job_id: str) -> dict:
    """The tasks page's one row for a job that spawned no child, as its data table loads it."""
    [row] = _page_rows(flower, job_id)
    return row


def _page_rows(flower: str, job_id: str) -> list[dict]:
    """The tasks page's rows of a job, as its data table loads them."""
    page = httpx.get(
        f"{flower}/tasks/datatable",
        auth=AUTH,
        timeout=5,
        params={
            "draw": 1,
            "start": 0,
            "length": 50,
            "search[value]": job_id,
            "order[0][column]": 0,
            "order[0][dir]": "desc",
            "columns[0][data]": "received",
        },
    ).json()
    return page["data"]


def test_a_job_sent_through_flowers_api_runs_and_its_result_reads_back(flower, client):
    sent = httpx.post(
        f"{flower}/api/task/send-task/covey.run_job",
        auth=AUTH,
        timeout=10,
        json={"kwargs": {"spec": {"task": "What is 6 * 7?", "budget": {"max_tokens": 20000}}}},
    )
    assert sent.status_code == 200, sent.text
    job_id = sent.json()["task-id"]
    result = _wait_for(
        lambda: httpx.get(f"{flower}/api/task/result/{job_id}", auth=AUTH, timeout=5).json(),
        lambda r: r.get("state") == "SUCCESS",
        f"a result for {job_id}",
        seconds=60,
    )["result"]
    assert (result["status"], result["output"], result["job_id"]) == ("completed", "42", job_id)
    assert client.job(job_id).status() == "completed"


def test_metrics_ask_for_the_password(flower):
    assert httpx.get(f"{flower}/metrics", timeout=5).status_code == 401
    assert httpx.get(f"{flower}/metrics", auth=("ops", "wrong"), timeout=5).status_code == 401
    metrics = httpx.get(f"{flower}/metrics", auth=AUTH, timeout=5)
    assert metrics.status_code == 200 and "flower_events_total" in metrics.text


@pytest.mark.parametrize(
    "args, field",
    [
        (["--address", "0.0.0.0"], "--address 0.0.0.0 is not a loopback address"),
        (["--address", "flower.example"], "--address flower.example is not a loopback address"),
        (["--basic-auth", "ops"], "--basic-auth: give user:password"),
    ],
)
def test_flower_refuses_a_network_address_without_a_password(args, field):
    proc = subprocess.run(
        [sys.executable, "-m", "covey", "flower", "--port", "0", *args],
        env=worker_env("redis://127.0.0.1:1/0"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"Error: {field}") and len(proc.stderr.splitlines()) == 1
