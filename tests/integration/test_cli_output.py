"""What a person reads: the demo and the plain-text tables."""

from __future__ import annotations

import re

import pytest


@pytest.mark.slow
def test_demo_runs_the_main_job_and_shows_the_tree(cli):
    proc = cli("demo")
    assert proc.returncode == 0, proc.stderr
    assert "status   completed" in proc.stdout and "output   leaves=9" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\s*root(-sub-[0-9a-f]{8})*\s", line)]
    assert len(rows) == 13
    assert all(" completed " in row for row in rows)
    sweep = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines() if line.startswith("sim/")}
    assert sweep == {"sim/react": "100.0%", "sim/single": "100.0%"}  # the small sweep, scored


def test_run_tree_and_ledger_print_readable_tables(cli):
    proc = cli("run", "What is 2 + 2?", "--max-tokens", "9000")
    assert proc.returncode == 0, proc.stderr
    job_id = re.search(r"^job (\S+)", proc.stderr, re.M)[1]
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines())
    assert (lines["job"], lines["status"], lines["output"]) == (job_id, "completed", "4")
    usage = r"\d+ tokens \(\d+ prompt, \d+ completion\), 2 cycles, 1 tool calls, 0 sub-agents"
    assert re.fullmatch(usage, lines["usage"])

    tree = cli("tree", job_id).stdout.splitlines()
    headers = ["agent", "role", "status", "tokens", "cost", "cycles", "tool", "calls", "elapsed", "task"]
    assert tree[0].split() == headers
    assert tree[1].endswith("What is 2 + 2?")
    assert tree[1].split()[:3] == ["root", "root", "completed"]
    assert tree[1].split()[4:7] == ["-", "2", "1"]  # no prices, two model calls, one calculator call

    ledger = cli("ledger", job_id).stdout
    tokens = next(line.split() for line in ledger.splitlines() if line.startswith("tokens"))
    assert tokens[2] == "9000" and 0 < int(tokens[1]) <= 9000
    assert "global" in ledger
    assert next(line.split() for line in ledger.splitlines() if line.startswith("tool calls"))[2] == "1"


@pytest.mark.slow
def test_demo_json_is_the_result_and_the_tree(cli):
    import json

    proc = cli("demo", "--json", "--width", "2", "--depth", "1")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["result"]["output"] == "leaves=2"
    assert sorted(n["depth"] for n in shown["nodes"]) == [0, 1, 1]
