"""A reply streamed to the job's events while the model writes it (``stream``):
in pieces, while the call is still in flight, joining to the reply's text, and
settled as the same call unstreamed would be."""

from __future__ import annotations

import json

from covey import keys
from covey.events import EventType, JobEvent

ANSWER = "The tide comes in twice a day because the moon pulls the sea toward it."
TASK = f"[sim:latency 2000] [sim:answer {ANSWER}] why are there tides?"


def test_a_streamed_reply_arrives_in_pieces_while_its_call_runs_and_joins_to_its_text(client):
    job = client.submit(client.spec(TASK, strategy="single", stream=True))
    events: list[JobEvent] = []
    in_flight_at_first_delta = None
    for event in job.events(follow=True, timeout=60):
        if event.type is EventType.MODEL_DELTA and in_flight_at_first_delta is None:
            held = client.redis.hget(keys.calls(job.id), event.call_id) or ""
            in_flight_at_first_delta = held.startswith("{")  # reserved, not yet settled
        events.append(event)
    result = job.result(timeout=10)
    assert result.ok and result.output == ANSWER
    assert in_flight_at_first_delta, "the first piece came only once the call was settled"
    deltas = [e for e in events if e.type is EventType.MODEL_DELTA]
    assert len(deltas) >= 2  # a few a second over the call's two seconds, not the reply at once
    assert [d.offset for d in deltas] == [sum(len(d.text) for d in deltas[:i]) for i in range(len(deltas))]
    assert "".join(d.text for d in deltas) == ANSWER
    (finished,) = [i for i, e in enumerate(events) if e.type is EventType.MODEL_FINISHED]
    assert all(events.index(d) < finished for d in deltas)  # every piece before the call's end
    (call,) = [e for e in job.transcript().events if e.kind == "model"]
    assert call.reply["content"] == ANSWER

    unstreamed = client.submit(client.spec(TASK, strategy="single"))
    assert unstreamed.result(timeout=60).usage == result.usage  # the same call, charged the same
    assert not [e for e in unstreamed.events() if e.type is EventType.MODEL_DELTA]


def test_covey_run_stream_asks_for_it_and_covey_events_shows_the_pieces(cli, client):
    run = cli("run", "--stream", "--strategy", "single", "--json", TASK)
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)["job_id"]
    shown = cli("events", job_id)
    pieces = [line for line in shown.stdout.splitlines() if line.split()[1] == "model.delta"]
    assert len(pieces) >= 2 and all("call 1 +" in line for line in pieces), shown.stdout
