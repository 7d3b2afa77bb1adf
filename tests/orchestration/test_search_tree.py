"""The pure MCTS tree of lats: UCT selection, backpropagation, best path."""

from __future__ import annotations

import json
import math

import pytest

from covey.orchestration import search_tree as st


def grown(*scores_by_parent: tuple[int, list[float]]) -> st.Tree:
    """A tree where each (parent, scores) adds one child per score and backs it up."""
    tree = st.new_tree()
    for parent, scores in scores_by_parent:
        for score in scores:
            tree, child = st.add_child(tree, parent, f"a{len(tree['nodes'])}")
            tree = st.backpropagate(tree, child, score)
    return tree


def test_a_new_tree_is_one_unvisited_root_and_plain_json():
    tree = st.new_tree()
    assert tree == json.loads(json.dumps(tree))
    assert tree["nodes"] == [
        {"id": 0, "parent": None, "depth": 0, "action": "", "children": [], "visits": 0, "value": 0.0}
    ]


def test_add_child_keeps_payload_links_parent_and_leaves_the_input_alone():
    tree = st.new_tree()
    bigger, child = st.add_child(tree, st.ROOT, "step", score=0.7)
    assert tree["nodes"][0]["children"] == [] and len(tree["nodes"]) == 1
    assert child == 1 and bigger["nodes"][0]["children"] == [1]
    assert bigger["nodes"][1] == {
        "id": 1,
        "parent": 0,
        "depth": 1,
        "action": "step",
        "children": [],
        "visits": 0,
        "value": 0.0,
        "score": 0.7,
    }


def test_backpropagation_adds_a_visit_and_the_score_along_the_path_only():
    tree = grown((0, [0.2, 0.8]))
    tree, deep = st.add_child(tree, 2, "deeper")
    before = json.loads(json.dumps(tree))
    after = st.backpropagate(tree, deep, 0.5)
    assert tree == before
    assert st.path(after, deep) == [0, 2, deep]
    assert [(n["visits"], n["value"]) for n in after["nodes"]] == [(3, 1.5), (1, 0.2), (2, 1.3), (1, 0.5)]


def test_uct_is_mean_plus_weighted_exploration_and_infinite_when_unvisited():
    node = {"visits": 2, "value": 1.0}
    assert st.uct(node, 6, 1.41) == pytest.approx(0.5 + 1.41 * math.sqrt(math.log(6) / 2))
    assert st.uct(node, 6, 0) == 0.5
    assert st.uct({"visits": 0, "value": 0.0}, 6, 1.41) == math.inf


def test_selection_descends_by_uct_to_a_leaf():
    tree = grown((0, [1.0, 0.4, 0.2]), (1, [0.2, 1.0, 0.4]))
    # Root visits 6: node 1 has mean .65 over 4 visits, nodes 2 and 3 one visit each,
    # so exploration sends the search to node 2 (0.4 + 1.41*sqrt(ln 6)).
    assert st.select(tree, 1.41, seed=0, max_depth=5) == 2
    # Without exploration the best mean wins and the search descends to node 5 (1.0).
    assert st.select(tree, 0.0, seed=0, max_depth=5) == 5


def test_unvisited_children_come_first():
    tree = grown((0, [1.0, 0.9]))
    tree, fresh = st.add_child(tree, st.ROOT, "unvisited")
    assert st.select(tree, 1.41, seed=0, max_depth=5) == fresh


def test_ties_are_broken_by_the_seed_the_same_way_every_time():
    tree = grown((0, [0.5, 0.5, 0.5, 0.5]))
    picks = {seed: st.select(tree, 1.41, seed, max_depth=5) for seed in range(40)}
    assert set(picks.values()) == {1, 2, 3, 4}  # the seed, not the order, decides
    assert all(st.select(tree, 1.41, seed, max_depth=5) == pick for seed, pick in picks.items())


def test_selection_skips_subtrees_at_the_depth_cap_and_ends_when_none_is_left():
    tree = grown((0, [1.0, 0.1]))
    assert st.select(tree, 0.0, seed=0, max_depth=2) == 1
    tree = grown((0, [1.0, 0.1]), (1, [1.0]))  # node 1's only leaf now sits at depth 2
    assert st.select(tree, 0.0, seed=0, max_depth=2) == 2
    assert st.select(grown((0, [1.0, 0.1])), 0.0, seed=0, max_depth=1) is None


def test_the_best_leaf_has_the_highest_mean_the_earliest_on_ties_among_the_eligible():
    tree = grown((0, [0.3, 0.9, 0.9]), (1, [0.2]))
    assert st.leaves(tree) == [2, 3, 4]
    assert st.best_leaf(tree) == 2
    assert st.best_leaf(tree, lambda node: node["id"] != 2) == 3
    assert st.best_leaf(tree, lambda node: False) is None
    assert st.best_leaf(st.new_tree()) is None
