"""What a step decides on its delivery before it writes anything (``covey.worker.step.admit``
and ``checkpointed``), from the records ``covey.worker.snapshot`` reads: every case runs
over the in-memory records and over a real Redis, written the same way."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
import redis

from covey import keys, wire
from covey.budgets.ledger import AgentRow
from covey.context import RunContext
from covey.orchestration import registry
from covey.results import Usage
from covey.spec import AgentSpec
from covey.status import AgentStatus, CauseKind
from covey.store.checkpoints import Checkpoint
from covey.store.outbox import Message
from covey.store.tree import Node, pack
from covey.worker.agent_state import AgentState, Phase, dump_checkpoint
from covey.worker.completion import Completion, Kind
from covey.worker.snapshot import Delivery, MemoryStepRecords, RedisStepRecords, Snapshot
from covey.worker.step import WAITS_FOR_RESUME, Fail, admit, checkpointed

DIGEST = wire.digest({"task": "What is 6 * 7?"})


class Memory:
    """Writes records into ``MemoryStepRecords``."""

    def __init__(self) -> None:
        self.records = MemoryStepRecords()

    def node(self, job: str, node: Node) -> None:
        self.records.nodes[job, node.agent_id] = node

    def expect(self, job: str, agent: str, message: Message) -> None:
        self.records.expected[job, agent] = message.dumps()

    def checkpoint(self, job: str, agent: str, step: int, state: str) -> None:
        self.records.checkpoints[job, agent] = Checkpoint(step, state)

    def row(self, job: str, agent: str, digest: str | None = None) -> None:
        self.records.rows[job, agent] = AgentRow(agent_id=agent, depth=0, depth_limit=3, digest=digest)

    def scope(self, name: str) -> None:
        self.records.scopes.add(name)


class InRedis:
    """Writes the same records into a real Redis, where covey's stores keep them."""

    def __init__(self, client: redis.Redis) -> None:
        self.client, self.records = client, RedisStepRecords(client)

    def node(self, job: str, node: Node) -> None:
        self.client.hset(keys.nodes(job), node.agent_id, pack(node))

    def expect(self, job: str, agent: str, message: Message) -> None:
        self.client.hset(keys.expected(job), agent, message.dumps())

    def checkpoint(self, job: str, agent: str, step: int, state: str) -> None:
        self.client.hset(keys.checkpoint(job, agent), mapping={"round": step, "state": state})

    def row(self, job: str, agent: str, digest: str | None = None) -> None:
        fields = {"depth": 0, "depth_limit": 3, "deny": "[]", **({"digest": digest} if digest else {})}
        self.client.hset(keys.agent(job, agent), mapping=fields)

    def scope(self, name: str) -> None:
        self.client.sadd(keys.scopes_index(), name)


@pytest.fixture(params=["memory", "redis"])
def records(request, redis_server):
    if request.param == "memory":
        yield Memory()
        return
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    yield InRedis(client)
    client.close()


@pytest.fixture
def job() -> str:
    return f"admit-{uuid.uuid4().hex}"  # a job of its own: the Redis is the session's


def delivery(job: str, name: str = wire.RESUME, agent: str = "root", **fields) -> Delivery:
    kwargs = fields.pop("kwargs", {"job_id": job, "agent_id": agent, "spawn_round": 1})
    return Delivery(name, fields.pop("task_id", job), kwargs, job, agent, "covey", **fields)


def resume_of(d: Delivery) -> Message:
    """The message ``d`` is, as its outbox records it."""
    return Message(d.name, d.task_id, d.kwargs, {"queue": "covey"})


def seen(records, d: Delivery, stored: bool = False) -> Snapshot:
    return records.records.snapshot(d, lambda _: stored)


def dropped(outcome, says: str, level: int = logging.INFO) -> None:
    assert isinstance(outcome, Completion) and outcome.kind is Kind.DROP, outcome
    assert says in outcome.reason and outcome.level == level


def test_the_expected_message_is_taken_up_as_stored(records, job):
    d = delivery(job)
    records.row(job, "root")
    records.expect(job, "root", resume_of(d))
    assert admit(d, seen(records, d)) == resume_of(d).dumps()


def test_a_message_its_agent_does_not_expect_is_dropped(records, job):
    d = delivery(job)
    records.row(job, "root")
    records.expect(job, "root", resume_of(delivery(job, kwargs={"job_id": job, "agent_id": "root", "spawn_round": 2})))
    dropped(admit(d, seen(records, d)), "does not expect this covey.resume message")


def test_a_root_s_first_step_is_taken_up_though_no_outbox_records_it(records, job):
    d = delivery(job, wire.RUN_JOB, kwargs={"spec": {}}, digest=DIGEST)
    assert admit(d, seen(records, d)) is None
    records.row(job, "root", DIGEST)  # opened by this very message: a redelivery of it
    assert admit(d, seen(records, d)) is None


def test_a_run_job_past_its_first_step_and_expected_by_none_is_dropped(records, job):
    d = delivery(job, wire.RUN_JOB, kwargs={"spec": {}}, digest=DIGEST)
    records.row(job, "root", DIGEST)
    records.checkpoint(job, "root", 1, "{}")
    dropped(admit(d, seen(records, d)), "does not expect this covey.run_job message")


def test_a_run_job_of_another_spec_under_a_job_s_id_is_refused_before_anything_else(records, job):
    d = delivery(job, wire.RUN_JOB, kwargs={"spec": {}}, digest=wire.digest({"task": "other"}))
    records.row(job, "root", DIGEST)
    records.node(job, Node(agent_id="root", status=AgentStatus.COMPLETED, output="42"))
    dropped(admit(d, seen(records, d, stored=True)), "ran another spec", logging.WARNING)


def test_a_scope_never_created_refuses_the_job(records, job):
    d = delivery(job, wire.RUN_JOB, kwargs={"spec": {}}, digest=DIGEST, scopes=("global", "tenant:acme"))
    outcome = admit(d, seen(records, d))
    assert outcome.kind is Kind.REFUSE and "no ledger scope tenant:acme" in outcome.reason
    records.scope("tenant:acme")
    assert admit(d, seen(records, d)) is None


def test_a_redelivered_step_of_a_finished_agent_answers_with_its_end_once(records, job):
    d = delivery(job)
    records.row(job, "root")
    records.node(job, Node(agent_id="root", status=AgentStatus.COMPLETED, output="42", usage=Usage(cycles=2)))
    answered = admit(d, seen(records, d))
    assert answered.kind is Kind.DONE and answered.value["output"] == "42" and answered.value["usage"]["cycles"] == 2
    dropped(admit(d, seen(records, d, stored=True)), "already finished: redelivered step ignored")


def test_a_step_of_a_job_whose_records_are_gone_fails_state_lost(records, job):
    d = delivery(job, wire.AGENT, agent="root-sub-1", kwargs={})
    outcome = admit(d, seen(records, d))
    assert isinstance(outcome, Fail) and outcome.cause is CauseKind.STATE_LOST
    assert "the records of job" in outcome.reason and "are gone from Redis" in outcome.reason
    records.row(job, "root")  # its job lives: it is merely not expected
    dropped(admit(d, seen(records, d)), "does not expect this covey.agent message")


def waiting(spawn_round: int, phase: Phase = Phase.AWAITING_CHILDREN) -> str:
    """A root's checkpoint at ``spawn_round``, waiting on one child (or, in another ``phase``, going on)."""
    ctx = RunContext(job_id="j", agent_id="root", budget={"max_depth": 2})
    spec = AgentSpec(task="go", strategy="single")
    state = AgentState(
        ctx=ctx,
        spec=spec,
        strategy_state=registry.strategy("single").State(),
        started_at="2026-12-04T00:00:00Z",
        spawn_round=spawn_round,
        step=spawn_round,
        pending=[{"agent_id": "root-sub-1"}],
        phase=phase,
    )
    return dump_checkpoint(state)


def took_up(records, job: str, spawn_round: int):
    d = delivery(job)
    return checkpointed(seen(records, d), d, "spawn_round", spawn_round, WAITS_FOR_RESUME)


def test_a_resume_takes_up_the_checkpoint_of_its_round(records, job):
    records.checkpoint(job, "root", 2, waiting(2))
    state = took_up(records, job, 2)
    assert isinstance(state, AgentState) and state.spawn_round == 2


def test_a_resume_of_a_round_the_agent_is_past_is_stale(records, job):
    records.checkpoint(job, "root", 3, waiting(3))
    dropped(took_up(records, job, 2), "is past spawn round 2: stale task ignored")
    records.checkpoint(job, "root", 2, waiting(2, Phase.PAUSED))  # its slice ran out: it waits on no resume
    dropped(took_up(records, job, 2), "is past spawn round 2: stale task ignored")


def test_a_resume_whose_checkpoint_is_lost_fails_saying_so(records, job):
    lost = took_up(records, job, 2)
    assert isinstance(lost, Fail) and lost.reason == "checkpoint of agent root lost; cannot resume spawn round 2"
    records.checkpoint(job, "root", 1, waiting(1))
    earlier = took_up(records, job, 2)
    assert isinstance(earlier, Fail) and earlier.reason == "checkpoint of spawn round 2 lost (spawn round 1 found)"
    records.checkpoint(job, "root", 2, json.dumps({"agent": {}}))
    unreadable = took_up(records, job, 2)
    assert isinstance(unreadable, Fail) and unreadable.reason.startswith("checkpoint refused: written with no format")


def test_a_copy_of_a_resume_whose_agent_finished_meanwhile_is_dropped(records, job):
    records.node(job, Node(agent_id="root", status=AgentStatus.COMPLETED))
    dropped(took_up(records, job, 2), "finished while this copy of spawn round 2 waited: ignored")
