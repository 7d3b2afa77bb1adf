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


def test_a_tree_capped_at_2500_tokens_spends_at_least_2000_of_them(cli):
    cap = 2500
    proc, result = run_json(cli, "[sim:spawn width=3 depth=2] survey the field", "--max-tokens", str(cap))
    assert result["status"] == "budget_exceeded", result
    ledger = json.loads(cli("ledger", result["job_id"], "--json").stdout)
    assert 2000 <= ledger["tokens_used"] <= cap and ledger["tokens_reserved"] == 0
    assert ledger["agents_spawned"] > 3  # the grandchildren ran too, not only the root's first wave


@pytest.mark.parametrize(
    "strategy, cap, cycles, least",
    [("single", 100, 1, 30), ("react", 1500, 2, 1000)],  # the samples cost about 37 and 1,200 tokens
)
def test_a_sweep_sample_runs_under_a_per_sample_cap_close_to_its_cost(
    settings, worker, tmp_path, strategy, cap, cycles, least
):
    grid = tmp_path / "g.toml"
    grid.write_text(f'strategies = ["{strategy}"]\nscorer = "numeric"\nbudgets = [{{ max_tokens = {cap} }}]\n')
    run_sweep(ARITHMETIC, grid, tmp_path / "out", settings=settings, max_in_flight=4, selection=Selection(limit=6))
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert Counter(r["status"] for r in rows) == {"completed": 6}
    assert all(r["score"] == 1.0 and r["usage"]["cycles"] == cycles for r in rows)
    assert all(least <= r["usage"]["total_tokens"] <= cap for r in rows)
