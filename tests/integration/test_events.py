"""A job's events as a service following it reads them: through the client and
``covey events``, in order, each once, whatever happens to the workers."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections import Counter

import pytest

from covey.client import Client
from covey.config.settings import Settings
from covey.events import EventType, JobEvent
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env
from tests.integration.test_durability import FAST_REDELIVERY, kill, wait_until
from tests.redis_server import RedisServer

TREE = "[sim:spawn width=3 depth=2] [sim:latency 400] followed"  # 13 agents: 1 + 3 + 9
AGENT_ORDER = (EventType.AGENT_OPENED, EventType.AGENT_RUNNING, EventType.AGENT_FINISHED)


def what(event: JobEvent) -> tuple[str, str, str | None]:
    """An event as two runs of one spec both write it: its ids are a run's own."""
    return event.type.value, event.agent_id, event.call_id


def assert_in_order(events: list[JobEvent], agents: int) -> None:
    """Each event once; every agent opened, then running, then finished, a child
    opened while its parent runs and finished before the job; the job's end last."""
    assert [e.id for e in events] == sorted(set(e.id for e in events), key=lambda i: tuple(map(int, i.split("-"))))
    seen = Counter(what(e) for e in events if e.type is not EventType.AGENT_RUNNING)
    assert max(seen.values()) == 1, [w for w, n in seen.items() if n > 1]
    at = {}
    for i, e in enumerate(events):
        at.setdefault((e.type, e.agent_id), i)
    opened = [e for e in events if e.type is EventType.AGENT_OPENED]
    assert len(opened) == agents == sum(e.type is EventType.AGENT_FINISHED for e in events)
    for e in opened:
        steps = [at[(kind, e.agent_id)] for kind in AGENT_ORDER]
        assert steps == sorted(steps), f"agent {e.agent_id}: {steps}"
        if e.parent_id is not None:
            assert at[(EventType.AGENT_RUNNING, e.parent_id)] < steps[0]
            assert steps[-1] < at[(EventType.JOB_FINISHED, "root")]
    assert events[-1].type is EventType.JOB_FINISHED


def follow_with_the_cli(redis_url: str, job_id: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "covey", "events", job_id, "--follow", "--json"],
        env=worker_env(redis_url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_a_tree_followed_through_a_worker_killed_mid_tree_has_each_event_once_and_in_order():
    with RedisServer() as server:
        client = Client(Settings(redis_url=server.url))
        first = start_worker(server.url, **FAST_REDELIVERY)
        second = None
        try:
            wait_for_worker(client, first)
            spec = client.spec(TREE)
            clean = client.submit(spec)
            assert clean.result(timeout=120).ok
            handle = client.submit(spec)
            cli = follow_with_the_cli(server.url, handle.id)
            followed: list[JobEvent] = []
            reader = threading.Thread(target=lambda: followed.extend(handle.events(follow=True, timeout=180)))
            reader.start()
            wait_until(lambda: sum(n.final for n in client.tree.nodes(handle.id)) >= 2, "two agents finished")
            kill(first)
            second = start_worker(server.url, **FAST_REDELIVERY)
            result = handle.result(timeout=120)
            reader.join(timeout=60)
            out, err = cli.communicate(timeout=60)
        finally:
            for worker in (first, second):
                if worker is not None:
                    stop_worker(worker)
        assert result.ok and result.output == "leaves=9", result.error
        assert cli.returncode == 0, err
        printed = [JobEvent.loads(e["id"], json.dumps(e)) for e in map(json.loads, out.splitlines())]
        assert [(e.id, e.type) for e in printed] == [(e.id, e.type) for e in followed]
        assert followed == list(handle.events())  # followed live, or read once it ended: the same
        assert_in_order(followed, agents=13)
        cleanly = list(clean.events())
        assert_in_order(cleanly, agents=13)
        assert {what(e) for e in followed} == {what(e) for e in cleanly}
        assert [e.output for e in followed if e.type is EventType.JOB_FINISHED] == ["leaves=9"]
        finished = [e for e in followed if e.type is EventType.MODEL_FINISHED]
        assert sum(e.usage.total_tokens for e in finished) == result.usage.total_tokens  # each settlement once


def test_a_job_read_as_it_runs_resumes_after_any_event(client):
    handle = client.submit(client.spec("[sim:spawn width=2 depth=1] [sim:latency 100] What is 2 + 3?"))
    whole = list(handle.events(follow=True, timeout=60))
    assert_in_order(whole, agents=3)
    middle = whole[len(whole) // 2]
    assert list(handle.events(after=middle.id)) == whole[len(whole) // 2 + 1 :]

    async def read() -> list[JobEvent]:
        return [e async for e in handle.aevents(follow=True, timeout=60)]

    assert asyncio.run(read()) == whole
    tool = next(e for e in whole if e.type is EventType.TOOL_FINISHED)
    assert (tool.tool, tool.result) == ("calculator", "5")
    waiting = next(e for e in whole if e.type is EventType.AGENT_WAITING)
    assert waiting.agent_id == "root" and len(waiting.awaiting) == 2


def test_following_a_refused_job_ends_with_its_refusal(client, bare):
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "hi", "strategy": "no_such_strategy"}})
    sent.get(timeout=60, propagate=False)
    assert list(client.job(sent.id).events(follow=True, timeout=60)) == []


def test_covey_events_says_what_is_wrong_with_a_job_or_an_event_id_in_one_line(cli, client):
    handle = client.submit(client.spec("What is 2 + 3?"))
    handle.result(timeout=60)
    shown = cli("events", handle.id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert [line.split()[1] for line in lines] == [e.type.value for e in handle.events()]
    assert lines[-1].split()[1:] == [
        "job.finished",
        "root",
        "completed",
        f"({handle.result().usage.total_tokens}",
        "tokens):",
        "5",
    ]
    for args, code, said in [
        (("events", "no-such-job"), 1, "unknown job no-such-job: no events recorded"),
        (("events", handle.id, "--after", "12-0"), 1, f"job {handle.id} has no event 12-0"),
        (("events", handle.id, "--after", "yesterday"), 2, "'yesterday' is not an event id"),
    ]:
        run = cli(*args)
        assert (run.returncode, run.stdout) == (code, ""), run
        errors = [line for line in run.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and said in errors[0], run.stderr
