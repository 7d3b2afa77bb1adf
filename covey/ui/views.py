"""What the pages show, computed from covey's records and nothing else: the rows of
a tree in the order a person reads it (each agent under its parent), and the
numbers as a person reads them. Pure, so the pages' logic is tested without a
browser."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from covey.budgets.ledger import AgentRow
from covey.parts import readable
from covey.status import AgentStatus
from covey.store.tree import Node, by_parent

TASK_CHARS = 80  # a row's task: its start, on one line


@dataclass(frozen=True)
class Row:
    """One agent of the tree, at its place in reading order."""

    node: Node
    depth: int  # under the root, counted from 0 (its own depth may differ for a lost parent)

    @property
    def css(self) -> str:
        """Its status as a class name: ``failed``, ``running``, ``budget_exceeded``..."""
        return self.node.status.value


@dataclass(frozen=True)
class Spend:
    """What an agent's subtree spent: tokens, dollars, model calls, tool calls."""

    tokens: int
    cost_usd: float
    cycles: int
    tool_calls: int


def spend(node: Node, row: AgentRow | None) -> Spend:
    """An ended agent's spend as its node keeps it; a live one's as its ledger row
    counts it so far (its node is written only at its end)."""
    if node.final or row is None:
        u = node.usage
        return Spend(u.total_tokens, u.cost_usd, u.cycles, u.tool_calls)
    return Spend(row.tokens_used, row.cost_used, row.cycles_used, row.tool_calls_used)


def why(node: Node) -> str:
    """What a row says beside its status: why it failed, what it waits for, or that it
    answered in a wrap-up call once its budget ran out (completed, with a cause)."""
    cause = node.cause
    if node.error:
        return f"{cause.kind.value}: {node.error}" if cause else node.error
    if node.wait:
        return node.wait.reason
    if node.status is AgentStatus.COMPLETED and cause is not None:
        return f"wrapped up: its {cause.resource.value if cause.resource else cause.kind.value} budget ran out"
    return ""


def rows(nodes: list[Node]) -> list[Row]:
    """Every node once, depth first, children in the order given; a node whose parent
    is not among ``nodes`` (not written yet) is shown at the top level after the rest."""
    children = by_parent(nodes)
    known = {n.agent_id for n in nodes}
    ordered: list[Row] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in children.get(parent, []):
            ordered.append(Row(node, depth))
            walk(node.agent_id, depth + 1)

    walk(None, 0)
    for parent in children:
        if parent is not None and parent not in known:
            walk(parent, 0)
    return ordered


def dollars(usd: float | None) -> str:
    """Money to the micro-dollar the ledger keeps; nothing for none."""
    return "" if usd is None else f"${usd:,.6f}"


def elapsed(node: Node, now: datetime) -> str:
    """Seconds from its start to its end (to ``now`` while it runs)."""
    if node.started_at is None:
        return ""
    return f"{((node.finished_at or now) - node.started_at).total_seconds():.1f}s"


def ago(at: datetime, now: datetime) -> str:
    """``12s ago``, ``5m ago``, ``3h ago``, ``2d ago``."""
    seconds = max(0, int((now - at).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def short(text: str | None, chars: int = TASK_CHARS) -> str:
    """The start of ``text`` on one line."""
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= chars else line[: chars - 1] + "…"


def share(used: float, limit: float | None) -> float | None:
    """How much of a cap is used, 0..1 (None without a cap)."""
    if not limit:
        return None
    return min(1.0, max(0.0, used / limit))


def _content(content: Any) -> str:
    """Content parts as text (each image described), anything else as JSON."""
    return readable(content) if isinstance(content, list) else json.dumps(content, indent=2)


def said(message: dict[str, Any]) -> str:
    """A message sent or a reply, as a person reads it: its text, then each tool call
    it makes as ``→ name(arguments)`` (OpenAI's form in a message, covey's in a reply)."""
    content = message.get("content")
    parts = [content if isinstance(content, str) else _content(content)] if content else []
    for call in message.get("tool_calls") or []:
        function = call.get("function", call) if isinstance(call, dict) else {}
        parts.append(f"→ {function.get('name')}({function.get('arguments', '')})")
    return "\n".join(parts)
