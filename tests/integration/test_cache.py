"""The reply cache through a worker: a job asked again with ``cache`` on is
answered from it, charged nothing but its cycles, and says so in its transcript
and events; a job without it calls the model; a sweep run again is served whole."""

from __future__ import annotations

import json
import uuid

from covey.events import EventType
from tests.integration.test_tools import covey


def unique() -> int:
    return uuid.uuid4().int % 10**6  # a task no other test asked: its calls are new to the cache


def test_a_job_asked_again_with_the_cache_is_answered_from_it_and_charged_nothing(client):
    task = f"[sim:spawn width=2 depth=1] What is {unique()} * 3?"
    first = client.submit(client.spec(task, cache=True))
    made = first.result(timeout=60)
    again = client.submit(client.spec(task, cache=True))
    served = again.result(timeout=60)
    assert made.ok and served.ok and served.output == made.output
    assert made.usage.total_tokens > 0 and served.usage.total_tokens == 0
    assert served.usage.cycles == made.usage.cycles and served.usage.agents == made.usage.agents == 2
    assert again.ledger().tokens_used == 0

    transcript = again.transcript()
    assert transcript is not None
    calls = [e for e in transcript.events if e.kind == "model"]
    assert calls and all(e.cached and e.usage.total_tokens == 0 for e in calls)
    assert not any(e.cached for e in first.transcript().events if e.kind == "model")
    finished = [e for e in again.events() if e.type is EventType.MODEL_FINISHED]
    assert len(finished) == made.usage.cycles and all(e.cached for e in finished)

    without = client.submit(client.spec(task)).result(timeout=60)  # no cache asked: the model answers
    assert without.ok and without.usage.total_tokens == made.usage.total_tokens


def test_a_call_after_one_served_from_the_cache_reserves_its_whole_prompt(client):
    """A served call counted no prompt tokens: the next call's bound must not start from that 0."""
    task = f"What is {unique()} * 3?"  # two calls of one step: the calculator's, then the answer

    def reserved(handle) -> list[int]:
        return [e.reserved for e in handle.events() if e.type is EventType.MODEL_STARTED]

    first = client.submit(client.spec(task, cache=True))
    assert first.result(timeout=60).ok
    again = client.submit(client.spec(task, cache=True))
    assert again.result(timeout=60).usage.total_tokens == 0
    assert len(reserved(first)) == len(reserved(again)) == 2
    assert reserved(again)[1] >= reserved(first)[1]


def test_a_sweep_run_again_with_the_cache_is_served_whole_at_no_tokens(redis_server, client, tmp_path):
    start = unique()
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": i, "input": f"What is {start + i} + 1?", "target": start + i + 1}) + "\n"
            for i in range(4)
        )
    )
    grid = tmp_path / "g.toml"
    grid.write_text('strategies = ["react", "single"]\nscorer = "numeric"\ncache = true\n')
    outcomes = []
    for out in ("first", "again"):
        swept = covey(redis_server, "sweep", str(dataset), "--grid", str(grid), "--out", str(tmp_path / out))
        assert swept.returncode == 0, swept.stderr
        records = [json.loads(line) for line in (tmp_path / out / "results.jsonl").read_text().splitlines()]
        outcomes.append(
            {(r["sample_id"], r["config"]): (r["output"], r["score"], r["usage"]["total_tokens"]) for r in records}
        )
    first, again = outcomes
    assert len(first) == 8 and first.keys() == again.keys()
    assert all(tokens > 0 and score == 1.0 for _, score, tokens in first.values())
    assert {k: (o, s) for k, (o, s, _) in again.items()} == {k: (o, s) for k, (o, s, _) in first.items()}
    assert all(tokens == 0 for _, _, tokens in again.values())
