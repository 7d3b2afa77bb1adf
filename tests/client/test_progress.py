"""A job at a glance, from its nodes and ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from covey.budgets.ledger import LedgerSnapshot
from covey.client.progress import Progress
from covey.status import Wait
from covey.store.tree import Node


def test_counts_agents_by_state_and_shows_spend_against_caps():
    nodes = [
        Node(agent_id="root", status="waiting"),
        Node(agent_id="a", parent_id="root", status="completed"),
        Node(agent_id="b", parent_id="root", status="budget_exceeded"),
        Node(agent_id="c", parent_id="root", status="running"),
        Node(agent_id="d", parent_id="root", status="queued"),
    ]
    ledger = LedgerSnapshot(job_id="j", tokens_used=1234, tokens_limit=5000, cycles_used=7, cycles_limit=None)
    progress = Progress.of("j", nodes, ledger, elapsed=3.21)
    assert (progress.status, progress.done, progress.running, progress.waiting, progress.queued) == (
        "waiting",
        2,
        1,
        1,
        1,
    )
    assert not progress.finished
    assert progress.line() == "2 done, 1 running, 1 waiting, 1 queued | tokens 1234/5000 | cycles 7/∞ started | 3.2s"


def test_a_job_with_no_nodes_yet_is_queued_and_a_final_root_is_finished():
    empty = Progress.of("j", [], LedgerSnapshot(job_id="j"), elapsed=0)
    assert empty.status == "queued" and not empty.finished
    done = Progress.of("j", [Node(agent_id="root", status="failed")], LedgerSnapshot(job_id="j"), elapsed=1)
    assert done.finished and done.done == 1


def test_says_what_agents_waiting_for_a_scope_wait_for():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    cap = Wait(reason="tenant:acme running cap 2/2", until=now + timedelta(seconds=3))
    window = Wait(reason="the per-minute window of scope tenant:acme (tokens per minute)", until=now)
    nodes = [
        Node(agent_id="root", status="waiting"),  # on its children: no wait of its own
        Node(agent_id="a", parent_id="root", status="waiting", wait=cap),
        Node(agent_id="b", parent_id="root", status="waiting", wait=window),
    ]
    progress = Progress.of("j", nodes, LedgerSnapshot(job_id="j"), elapsed=1, now=now)
    assert progress.line().split(" | ")[:2] == [
        "0 done, 0 running, 3 waiting, 0 queued",
        "waiting: tenant:acme running cap 2/2, ~3 s (and 1 more)",
    ]
    alone = Progress.of("j", nodes[2:], LedgerSnapshot(job_id="j"), elapsed=1, now=now)
    assert (
        alone.line().split(" | ")[1] == "waiting: the per-minute window of scope tenant:acme (tokens per minute), ~0 s"
    )
