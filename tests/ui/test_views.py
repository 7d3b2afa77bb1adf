"""What the pages show, from records alone: a tree in reading order, spend and
time as a person reads them, a message and its tool calls on lines of their own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from covey.budgets.ledger import AgentRow
from covey.results import Usage
from covey.status import AgentStatus, Cause, CauseKind, Resource
from covey.store.tree import Node
from covey.ui import views

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def node(agent_id: str, parent_id: str | None = None, **fields) -> Node:
    return Node(agent_id=agent_id, parent_id=parent_id, **fields)


def test_rows_put_each_agent_under_its_parent_depth_first():
    nodes = [node("root"), node("a", "root"), node("b", "root"), node("a1", "a"), node("b1", "b"), node("a2", "a")]
    assert [(r.node.agent_id, r.depth) for r in views.rows(nodes)] == [
        ("root", 0),
        ("a", 1),
        ("a1", 2),
        ("a2", 2),
        ("b", 1),
        ("b1", 2),
    ]


def test_an_agent_whose_parent_is_not_written_yet_is_still_shown_after_the_rest():
    rows = views.rows([node("root"), node("x1", "x"), node("a", "root")])
    assert [(r.node.agent_id, r.depth) for r in rows] == [("root", 0), ("a", 1), ("x1", 0)]


def test_a_rows_class_is_its_status():
    (row,) = views.rows([node("root", status=AgentStatus.BUDGET_EXCEEDED)])
    assert row.css == "budget_exceeded"


def test_a_live_agent_shows_what_its_ledger_row_counts_and_an_ended_one_its_node():
    row = AgentRow(
        agent_id="a", depth=1, depth_limit=3, tokens_used=900, cost_used=0.25, cycles_used=3, tool_calls_used=2
    )
    live = node("a", "root", status=AgentStatus.RUNNING)
    assert views.spend(live, row) == views.Spend(900, 0.25, 3, 2)
    ended = node(
        "a", "root", status=AgentStatus.COMPLETED, usage=Usage(prompt_tokens=800, completion_tokens=120, cycles=3)
    )
    assert views.spend(ended, row) == views.Spend(920, 0.0, 3, 0)
    assert views.spend(live, None) == views.Spend(0, 0.0, 0, 0)  # no row yet: nothing spent


def test_elapsed_runs_to_now_until_the_agent_ends():
    started = NOW - timedelta(seconds=12.34)
    assert views.elapsed(node("r", started_at=started), NOW) == "12.3s"
    assert views.elapsed(node("r", started_at=started, finished_at=started + timedelta(seconds=2)), NOW) == "2.0s"
    assert views.elapsed(node("r"), NOW) == ""


def test_ago_and_money_and_shares_read_as_a_person_reads_them():
    assert [views.ago(NOW - timedelta(seconds=s), NOW) for s in (5, 61, 7200, 200000)] == [
        "5s ago",
        "1m ago",
        "2h ago",
        "2d ago",
    ]
    assert views.ago(NOW + timedelta(seconds=3), NOW) == "0s ago"  # a clock a little ahead
    assert (views.dollars(0.0015), views.dollars(None)) == ("$0.001500", "")
    assert (views.share(50, 200), views.share(300, 200), views.share(5, None), views.share(5, 0)) == (
        0.25,
        1.0,
        None,
        None,
    )


def test_short_puts_text_on_one_line_and_cuts_it():
    assert views.short("a\n  b") == "a b"
    assert views.short("x" * 100, 10) == "x" * 9 + "…"
    assert views.short(None) == ""


def test_a_message_shows_its_text_then_each_tool_call():
    sent = {
        "role": "assistant",
        "content": "let me add",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}],
    }
    assert views.said(sent) == 'let me add\n→ add({"a": 1})'
    reply = {
        "tool_calls": [{"id": "c2", "name": "finish", "arguments": '{"answer": "5"}'}],
        "finish_reason": "tool_calls",
    }
    assert views.said(reply) == '→ finish({"answer": "5"})'
    image = {"type": "image_url", "image_url": {"url": "[image image/png 4x3, 70 bytes]"}}  # as a transcript keeps it
    assert views.said({"role": "user", "content": [{"type": "text", "text": "hi"}, image]}) == (
        "hi [image image/png 4x3, 70 bytes]"
    )


def test_a_row_says_why_it_failed_what_it_waits_for_or_that_it_wrapped_up():
    budget = Cause(kind=CauseKind.BUDGET, agent_id="root", resource=Resource.TOKENS)
    failed = node("root", None).model_copy(update={"status": AgentStatus.FAILED, "error": "boom", "cause": budget})
    wrapped = node("root", None).model_copy(update={"status": AgentStatus.COMPLETED, "cause": budget})
    plain = node("root", None).model_copy(update={"status": AgentStatus.COMPLETED})
    assert views.why(failed) == "budget: boom"
    assert views.why(wrapped) == "wrapped up: its tokens budget ran out"
    assert views.why(plain) == ""
