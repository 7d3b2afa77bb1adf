"""Caps a user can spend nearly to their end: reservations close to what calls cost
(the sim counts its prompts exactly, and a later call is reserved from the earlier
one's reported prompt), through the real CLI, worker, sweeps and Redis."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from covey.sweeps import run_sweep
from covey.sweeps.selection import Selection
from tests.integration.conftest import ROOT
from tests.integration.test_jobs import run_json

ARITHMETIC = ROOT / "examples" / "arithmetic.jsonl"


def test_a_tree_capped_at_2500_tokens_spends_at_least_2000_of_them_and_answers(cli):
    """A cap is left short by at most the one call it refuses, and what the root kept
    for its wrap-up (``covey.worker.wrap_up``) buys the job an answer. Offered every
    built-in, an agent's first call is about 840 tokens (the schemas), so the tree
    offers the two tools it uses, as a user would, and its calls are 300-700 tokens."""
    cap = 2500
    tree = ("[sim:spawn width=3 depth=2] survey the field", "--tools", "spawn_agents,finish")
    proc, result = run_json(cli, *tree, "--max-tokens", str(cap))
    assert (result["status"], result["data"]["wrapped_up"]) == ("completed", True), result
    assert result["cause"]["kind"] == "budget" and result["output"].startswith("leaves=")
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert 2000 <= ledger["tokens_used"] <= cap and ledger["tokens_reserved"] == 0
    assert ledger["agents_spawned"] > 3  # the grandchildren ran too, not only the root's first wave
    assert all(row["tokens_used"] <= row["tokens_limit"] for row in ledger["agents"])  # each within its own cap


def test_without_wrap_up_a_tree_whose_cap_runs_out_ends_budget_exceeded(cli):
    tree = ("[sim:spawn width=3 depth=2] survey the field", "--tools", "spawn_agents,finish", "--no-wrap-up")
    proc, result = run_json(cli, *tree, "--max-tokens", "2500")
    assert (result["status"], result["output"], result["data"]) == ("budget_exceeded", None, None), result
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert 2000 <= ledger["tokens_used"] <= 2500


@pytest.mark.parametrize(
    "strategy, cycles, room",
    # The caps over the costs a user met: 100 for a 37-token single sample, 1,500 for a
    # 1,196-token react one. The costs are measured here, since they grow with the tools offered.
    [("single", 1, 100 / 37), ("react", 2, 1500 / 1196)],
)
def test_a_sweep_sample_runs_under_a_per_sample_cap_close_to_its_cost(
    settings, worker, tmp_path, strategy, cycles, room
):
    def sweep(out: str, budget: str) -> list[dict]:
        grid = tmp_path / f"{out}.toml"
        grid.write_text(f'strategies = ["{strategy}"]\nscorer = "numeric"\n{budget}')
        run_sweep(ARITHMETIC, grid, tmp_path / out, settings=settings, max_in_flight=4, selection=Selection(limit=6))
        return [json.loads(line) for line in (tmp_path / out / "results.jsonl").read_text().splitlines()]

    cost = max(r["usage"]["total_tokens"] for r in sweep("uncapped", ""))
    cap = int(cost * room)
    rows = sweep("capped", f"budgets = [{{ max_tokens = {cap} }}]\n")
    assert Counter(r["status"] for r in rows) == {"completed": 6}, f"cap {cap} over a cost of {cost}"
    assert all(r["score"] == 1.0 and r["usage"]["cycles"] == cycles for r in rows)
    assert all(r["usage"]["total_tokens"] <= cap for r in rows)
