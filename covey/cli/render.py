"""Readable tables for the CLI (``--json`` prints the models instead)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from covey.budgets import scopes as scope_names
from covey.budgets.ledger import LedgerSnapshot, ScopeRow
from covey.results import AgentResult
from covey.store.tree import Node, by_parent
from covey.wire import cut, table

if TYPE_CHECKING:
    from covey.client.jobs import JobEntry


def result(r: AgentResult) -> str:
    u = r.usage
    lines = [
        f"job      {r.job_id}",
        f"status   {r.status.value}",
        f"output   {r.output if r.output is not None else '-'}",
    ]
    if r.error:
        lines.append(f"error    {r.error}")
    lines.append(
        f"usage    {u.total_tokens} tokens ({u.prompt_tokens} prompt, {u.completion_tokens} completion), "
        f"{u.cycles} cycles, {u.tool_calls} tool calls, {u.agents} sub-agents"
        + (f", {dollars(u.cost_usd)}" if u.cost_micros else "")
    )
    return "\n".join(lines)


def dollars(usd: float | None) -> str | None:
    """Money as a person reads it: to the micro-dollar the ledger keeps."""
    return None if usd is None else f"${usd:,.6f}"


def _spent(used: float, limit: float | None) -> str | None:
    """A row's cost: none shown for a row that has neither spent money nor a cap on it."""
    return dollars(used) if used or limit is not None else None


def tree(nodes: list[Node], now: datetime | None = None) -> str:
    """Every agent under its parent: status (and what it waits for, when it waits
    for a scope), role, spend, elapsed (to ``now`` for one still running) and the
    start of its task."""
    now = now or datetime.now(UTC)
    children = by_parent(nodes)
    rows: list[tuple[object, ...]] = []

    def walk(parent: str | None, indent: str) -> None:
        for node in children.get(parent, []):
            rows.append(
                (
                    indent + node.agent_id,
                    node.role,
                    node.status if node.wait is None else f"{node.status}: {node.wait.said(now)}",
                    node.usage.total_tokens,
                    dollars(node.usage.cost_usd) if node.usage.cost_micros else None,
                    node.usage.cycles,
                    node.usage.tool_calls,
                    _elapsed(node, now),
                    _short(node.task),
                )
            )
            walk(node.agent_id, indent + "  ")

    walk(None, "")
    return table(["agent", "role", "status", "tokens", "cost", "cycles", "tool calls", "elapsed", "task"], rows)


def _elapsed(node: Node, now: datetime) -> str | None:
    if node.started_at is None:
        return None
    return f"{((node.finished_at or now) - node.started_at).total_seconds():.1f}s"


def _short(text: str | None, chars: int = 40) -> str | None:
    """The start of ``text`` on one line (a line end would split the table's row)."""
    return None if text is None else cut(" ".join(text.split()), chars)


def ledger_totals(s: LedgerSnapshot) -> str:
    """The job's spend against its caps, without the per-agent rows."""
    return table(
        ["", "used", "limit"],
        [
            ("tokens", s.tokens_used, s.tokens_limit),
            ("cost", _spent(s.cost_used, s.cost_limit), dollars(s.cost_limit)),
            ("cycles", s.cycles_used, s.cycles_limit),
            ("agents", s.agents_spawned, s.agents_limit),
            ("tool calls", s.tool_calls_used, s.tool_calls_limit),
        ],
    )


def ledger(s: LedgerSnapshot) -> str:
    head = ledger_totals(s)
    agents = table(
        [
            "agent",
            "depth",
            "tokens",
            "token limit",
            "cost",
            "cost limit",
            "cycles",
            "cycle limit",
            "own calls cap",
            "tool calls",
            "spawned",
        ],
        [
            (
                a.agent_id,
                a.depth,
                a.tokens_used,
                a.tokens_limit,
                _spent(a.cost_used, a.cost_limit),
                dollars(a.cost_limit),
                a.cycles_used,
                a.cycles_limit,
                a.agent_cycles_limit,
                a.tool_calls_used,
                a.agents_spawned,
            )
            for a in s.agents
        ],
    )
    return f"{head}\n\n{agents}\n\n{scopes(s.scopes)}"


NOT_COUNTED = "not counted"
UNCOUNTED = f"{NOT_COUNTED}: a scope is charged only while it caps tokens, cost, cycles or a minute's window"


def scopes(rows: list[ScopeRow]) -> str:
    """One row per scope; what an uncounted scope spent is not shown as 0, and a note says why."""
    shown = table(
        [
            "scope",
            "tokens",
            "token limit",
            "cost",
            "cost limit",
            "cycles",
            "cycle limit",
            "tokens/min",
            "requests/min",
            "running",
            "weight",
        ],
        [
            (
                c.name,
                c.tokens_used if c.counted else NOT_COUNTED,
                c.tokens_limit,
                _spent(c.cost_used, c.cost_limit) if c.counted else NOT_COUNTED,
                dollars(c.cost_limit),
                c.cycles_used if c.counted else NOT_COUNTED,
                c.cycles_limit,
                c.tokens_per_minute,
                c.requests_per_minute,
                _running(c),
                c.weight if scope_names.kind(c.name) == scope_names.TENANT else None,
            )
            for c in rows
        ],
    )
    return shown if all(c.counted for c in rows) else f"{shown}\n{UNCOUNTED}"


def jobs(entries: list[JobEntry], now: datetime | None = None) -> str:
    """One row per job, newest first: its status, how long ago it was sent, for whom."""
    now = now or datetime.now(UTC)
    return table(
        ["job", "status", "submitted", "tenant", "sweep", "strategy", "model", "task"],
        [
            (
                e.job_id,
                e.status,
                f"{(now - e.submitted_at).total_seconds():.0f}s ago",
                e.tenant,
                e.sweep,
                e.strategy,
                e.model or "default",
                _short(e.task),
            )
            for e in entries
        ],
    )


def _running(c: ScopeRow) -> str:
    """``3``, or against a cap ``2/2`` and its queue: ``2/2+998`` (998 waiting for a slot)."""
    if c.running_limit is None:
        return str(c.running)
    return f"{c.running}/{c.running_limit}" + (f"+{c.waiting}" if c.waiting else "")
