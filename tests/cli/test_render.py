"""What the CLI's tables show: one line per row, and no usage a scope never counted shown as 0."""

from __future__ import annotations

from datetime import UTC, datetime

from covey.budgets.ledger import ScopeRow
from covey.cli import render
from covey.store.tree import Node


def test_a_task_with_line_ends_stays_on_its_row_of_the_tree():
    at = datetime(2026, 1, 1, tzinfo=UTC)
    nodes = [Node(agent_id="root", task="Expand:\n  try the\tlong way", started_at=at, finished_at=at)]
    shown = render.tree(nodes, now=at).splitlines()
    assert len(shown) == 2 and shown[1].endswith("Expand: try the long way")


def test_a_scope_without_a_cap_shows_its_usage_as_not_counted():
    uncapped, capped = ScopeRow(name="global"), ScopeRow(name="tenant:a", tokens_used=7, tokens_limit=100)
    assert (uncapped.counted, capped.counted) == (False, True)
    assert ScopeRow(name="tenant:b", requests_per_minute=5).counted
    lines = render.scopes([uncapped, capped]).splitlines()
    assert lines[-1] == render.UNCOUNTED
    assert lines[1].split()[:3] == ["global", "not", "counted"] and lines[2].split()[:2] == ["tenant:a", "7"]
    assert render.UNCOUNTED not in render.scopes([capped])
