"""The Monte Carlo search tree of the lats strategy: pure functions over JSON.

A tree is ``{"nodes": [node, ...]}`` with each node's ``id`` its index, so the whole
tree checkpoints in Redis as is and a replayed step rebuilds exactly the same one.
A node is ``{"id", "parent", "depth", "action", "children", "visits", "value"}``
plus whatever payload its caller adds (lats keeps each evaluation there).

Every function returns a new tree and never mutates its argument: the strategy's
state may be the worker's checkpointed copy.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable
from typing import Any

Tree = dict[str, Any]
Node = dict[str, Any]

ROOT = 0


def new_tree() -> Tree:
    """A tree of one unvisited root: the empty path."""
    return {"nodes": [_node(ROOT, None, 0, "")]}


def _node(node_id: int, parent: int | None, depth: int, action: str, **payload: Any) -> Node:
    return {
        "id": node_id,
        "parent": parent,
        "depth": depth,
        "action": action,
        "children": [],
        "visits": 0,
        "value": 0.0,
        **payload,
    }


def add_child(tree: Tree, parent: int, action: str, **payload: Any) -> tuple[Tree, int]:
    """The tree with a new unvisited child of ``parent``, and the child's id."""
    tree = copy.deepcopy(tree)
    nodes = tree["nodes"]
    child = _node(len(nodes), parent, nodes[parent]["depth"] + 1, action, **payload)
    nodes.append(child)
    nodes[parent]["children"].append(child["id"])
    return tree, child["id"]


def path(tree: Tree, node_id: int) -> list[int]:
    """Ids from the root down to ``node_id``, both included."""
    ids = []
    current: int | None = node_id
    while current is not None:
        ids.append(current)
        current = tree["nodes"][current]["parent"]
    return ids[::-1]


def backpropagate(tree: Tree, node_id: int, score: float) -> Tree:
    """The tree with one visit and ``score`` added to the node and every ancestor."""
    tree = copy.deepcopy(tree)
    for step in path(tree, node_id):
        node = tree["nodes"][step]
        node["visits"] += 1
        node["value"] += score
    return tree


def uct(node: Node, parent_visits: int, weight: float) -> float:
    """``value/visits + weight * sqrt(ln(parent_visits) / visits)``; infinite for an
    unvisited node, so every child is tried once before any is tried twice."""
    if node["visits"] == 0:
        return math.inf
    exploration = math.sqrt(math.log(max(parent_visits, 1)) / node["visits"])
    return node["value"] / node["visits"] + weight * exploration


def select(tree: Tree, weight: float, seed: int, max_depth: int) -> int | None:
    """The leaf to expand next: from the root, the child of highest UCT at every
    level, among children whose subtree still has a leaf above ``max_depth``.

    Ties go to the child whose seeded digest is largest: arbitrary, yet the same
    for the same tree and seed, so a replayed step picks the same leaf. ``None``
    when no leaf can be expanded any more.
    """
    nodes = tree["nodes"]
    if not _expandable(nodes, ROOT, max_depth):
        return None
    current = nodes[ROOT]
    while current["children"]:
        parent_visits = current["visits"]
        open_children = [nodes[c] for c in current["children"] if _expandable(nodes, c, max_depth)]
        current = max(
            open_children,
            key=lambda child: (uct(child, parent_visits, weight), _tiebreak(seed, parent_visits, child["id"])),
        )
    return current["id"]


def _expandable(nodes: list[Node], node_id: int, max_depth: int) -> bool:
    node = nodes[node_id]
    if not node["children"]:
        return node["depth"] < max_depth
    return any(_expandable(nodes, c, max_depth) for c in node["children"])


def _tiebreak(seed: int, parent_visits: int, node_id: int) -> int:
    digest = hashlib.sha256(f"{seed}:{parent_visits}:{node_id}".encode()).hexdigest()
    return int(digest[:16], 16)


def leaves(tree: Tree) -> list[int]:
    """Ids of every node but the root that has no children, in creation order."""
    return [n["id"] for n in tree["nodes"] if n["id"] != ROOT and not n["children"]]


def mean(node: Node) -> float:
    """The node's average backed-up value; 0 before any visit."""
    return node["value"] / node["visits"] if node["visits"] else 0.0


def best_leaf(tree: Tree, eligible: Callable[[Node], bool] = lambda node: True) -> int | None:
    """The eligible leaf of highest mean value (the earliest on ties), or ``None``."""
    candidates = [tree["nodes"][i] for i in leaves(tree) if eligible(tree["nodes"][i])]
    if not candidates:
        return None
    return max(candidates, key=lambda node: (mean(node), -node["id"]))["id"]
