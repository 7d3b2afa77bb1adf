"""A ledger asked to wait for a replica (``COVEY_LEDGER_REPLICAS``) answers only
with what a replica holds: a charge its master acknowledged survives the master.
A replica that falls behind is waited out like an outage; one that never catches
up ends the wait with a connection error, never with a charge it cannot keep."""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Iterator

import pytest
import redis

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.redis_ledger import RedisLedger, ReplicasBehind, ReplicaWait
from tests.sentinels import Node, wait_for

CHAIN, SCOPES = ["root"], ["global"]


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Node, Node]]:
    """A master and a replica of it, no sentinels: what the ledger's WAIT counts."""
    master = Node().start()
    replica = Node(replica_of=master.port)
    try:
        replica.start()
        with redis.Redis(port=replica.port) as r:
            wait_for("the replica in sync", lambda: r.info("replication")["master_link_status"] == "up")
        yield master, replica
    finally:
        replica.stop()
        master.stop()


def _ledger(server: Node, replicas: int, seconds: float) -> RedisLedger:
    client = redis.Redis(port=server.port, decode_responses=True)
    return RedisLedger(client, keys.DEFAULT_JOB_TTL_SECONDS, replicas=ReplicaWait(replicas, seconds))


def _job(ledger: RedisLedger) -> str:
    job = f"job-{uuid.uuid4().hex}"
    ledger.open_root(job, "root", Budget(max_tokens=10_000, max_cycles=100, max_depth=0))
    return job


def test_a_granted_reservation_and_its_settlement_are_on_the_replica_when_the_call_returns(pair):
    master, replica = pair
    ledger = _ledger(master, 1, 5)
    job = _job(ledger)
    on_replica = redis.Redis(port=replica.port, decode_responses=True)
    assert ledger.reserve(job, CHAIN, SCOPES, "root:1", 300, 100).ok
    assert on_replica.hget(keys.calls(job), "root:1")  # the hold, as the replica has it now
    assert ledger.settle(job, CHAIN, SCOPES, "root:1", 250)
    assert int(on_replica.hget(keys.agent(job, "root"), "tokens_used")) == 250


def test_a_replica_behind_is_waited_for_and_the_call_answers_once_it_catches_up(pair):
    master, replica = pair
    ledger = _ledger(master, 1, 30)
    job = _job(ledger)
    replica.proc.send_signal(signal.SIGSTOP)  # connected, but confirming nothing
    answers: list = []
    call = threading.Thread(target=lambda: answers.append(ledger.reserve(job, CHAIN, SCOPES, "root:1", 300, 100)))
    try:
        call.start()
        call.join(timeout=2.5)  # two WAITs' worth: the call is still waiting
        assert call.is_alive() and not answers, "answered before any replica held the reservation"
    finally:
        replica.proc.send_signal(signal.SIGCONT)
    call.join(timeout=30)
    assert answers and answers[0].ok
    assert ledger.reserve(job, CHAIN, SCOPES, "root:1", 300, 100) == answers[0]  # held once, not twice
    assert ledger.snapshot(job).tokens_reserved == answers[0].tokens


def test_a_replica_that_never_confirms_ends_the_wait_as_an_outage(pair):
    master, replica = pair
    job = _job(_ledger(master, 1, 5))
    ledger = _ledger(master, 2, 1.5)  # two replicas asked for, one runs
    with pytest.raises(ReplicasBehind, match="confirmed by 1 of the 2 replica") as raised:
        ledger.reserve(job, CHAIN, SCOPES, "root:1", 300, 100)
    assert isinstance(raised.value, redis.ConnectionError)  # a worker hands the step back, as in an outage
    assert ledger.snapshot(job).tokens_reserved == 300  # on the master, once for all its runs


def test_a_master_that_lost_its_scripts_loads_them_again(pair):
    master, _ = pair
    ledger = _ledger(master, 1, 5)
    job = _job(ledger)
    ledger.client.script_flush()  # as a restarted or newly promoted master has none
    assert ledger.reserve(job, CHAIN, SCOPES, "root:1", 300, 100).ok
    assert ledger.settle(job, CHAIN, SCOPES, "root:1", 250)
