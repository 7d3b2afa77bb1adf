"""Nodes round-trip through their packed form, and a final node drops only its task id."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from covey.events import JobEvent
from covey.results import Usage
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.store.tree import Node, moved, pack, unpack


def node(status: str) -> Node:
    return Node(
        agent_id="root-sub-1",
        parent_id="root",
        depth=1,
        role="worker",
        status=status,
        usage=Usage(prompt_tokens=5, completion_tokens=2, cycles=1, agents=3),
        output="é ok",
        data={"k": [1]},
        task="do it",
        task_id="t-1",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_a_running_node_round_trips_whole():
    assert unpack("root-sub-1", pack(node(AgentStatus.RUNNING))) == node(AgentStatus.RUNNING)


def test_a_running_nodes_event_names_its_worker_process_which_the_stored_node_leaves_out():
    running = node(AgentStatus.RUNNING).model_copy(update={"worker": "host-a:4242"})
    assert JobEvent.loads("1-0", moved(running)).worker == "host-a:4242"
    assert pack(running) == pack(node(AgentStatus.RUNNING))  # readers of the release before know no such key


def test_a_final_node_keeps_all_but_its_task_id():
    stored = unpack("root-sub-1", pack(node("completed")))
    assert stored == node("completed").model_copy(update={"task_id": None})
    assert stored.usage.total_tokens == 7


def test_a_packed_node_is_compact():
    assert len(pack(node("completed"))) < len(node("completed").model_dump_json()) / 2


def test_a_failed_nodes_cause_round_trips_packed_and_a_completed_node_keeps_none():
    cause = Cause(kind=CauseKind.BUDGET, scope="sweep:s1", resource=Resource.TOKENS)
    failed = node(AgentStatus.BUDGET_EXCEEDED).model_copy(update={"task_id": None, "cause": cause})
    packed = pack(failed)
    assert json.loads(packed)["c"] == {"k": "budget", "s": "sweep:s1", "r": "tokens"}
    assert unpack("root-sub-1", packed) == failed
    assert unpack("root-sub-1", packed).result("job").cause == cause
    assert "c" not in json.loads(pack(node("completed")))
