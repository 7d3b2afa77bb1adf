"""A strategy installed on the workers alone: the submitter's machine lacks it, and
covey checks the name and the options against what the workers publish, as it
checks tools and models; a strategy no worker serves is refused at submit."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import plugin_worker
from tests.integration.test_durability import wait_until
from tests.integration.test_tools import covey

QUEUE = "plugin-strategies"


@pytest.fixture(scope="module")
def served(redis_server, tmp_path_factory):
    where = tmp_path_factory.mktemp("plugins")
    with plugin_worker(redis_server.url, where, QUEUE, {"probe": "tests.integration.probe_strategy"}) as client:
        # Up is not yet published: its catalog entry comes with its first heartbeat.
        wait_until(lambda: [s for e in client.catalog.entries(QUEUE) for s in e.strategies], "the catalog entry")
        yield redis_server, client


def run(redis_server, *args: str):
    # This process's PYTHONPATH and no more: the plugin's folder is the worker's alone.
    return covey(redis_server, "run", *args, "--json", COVEY_QUEUE=QUEUE)


def test_a_strategy_only_the_workers_have_is_accepted_and_runs(served):
    redis_server, _ = served
    child = json.dumps({"task": "What is 2 + 3?", "strategy": "react"})
    ran = run(redis_server, "--strategy", "probe", "--option", f"child={child}", "probe")
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert (result["status"], result["output"]) == ("completed", "5")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--strategy", "prob"], "strategy 'prob' is served by no worker on queue 'plugin-strategies'; served: "),
        (["--strategy", "prob"], "; did you mean 'probe'?"),
        (["--strategy", "probe"], "options: 'child' is a required property (strategy 'probe')"),
        (["--strategy", "probe", "--option", "child=3"], "options.child: 3 is not of type 'object' (strategy 'probe')"),
        (["--strategy", "probe", "--option", "child={}", "--option", "extra=1"], "options: Additional properties"),
    ],
)
def test_a_strategy_or_options_no_worker_takes_are_refused_at_submit(served, args, said):
    redis_server, _ = served
    refused = run(redis_server, *args, "probe")
    assert refused.returncode == 2, refused
    assert said in refused.stderr, refused.stderr


def test_a_sweep_runs_a_strategy_only_the_workers_have(served, tmp_path):
    redis_server, _ = served
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"id": "s1", "input": "probe", "target": 5}) + "\n")
    grid = tmp_path / "g.toml"
    grid.write_text(
        'scorer = "numeric"\n[[strategies]]\nname = "probe"\n'
        'options = { child = { task = "What is 2 + 3?", strategy = "react" } }\n'
    )
    out = tmp_path / "out"
    swept = covey(redis_server, "sweep", str(dataset), "--grid", str(grid), "--out", str(out), "--queue", QUEUE)
    assert swept.returncode == 0, swept.stderr
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (record["config"], record["status"], record["score"]) == ("default/probe", "completed", 1.0)
    grid.write_text('scorer = "numeric"\nstrategies = ["prob"]\n')
    refused = covey(
        redis_server, "sweep", str(dataset), "--grid", str(grid), "--out", str(tmp_path / "o2"), "--queue", QUEUE
    )
    assert (
        refused.returncode == 2
        and "configuration default/prob: strategy 'prob' is served by no worker" in refused.stderr
    )


def test_with_no_worker_publishing_this_machines_strategies_decide(redis_server):
    # The session's Redis: no worker listens on this queue, none publishes there.
    refused = covey(redis_server, "run", "--strategy", "probe", "x", COVEY_QUEUE="nobody-listens")
    assert refused.returncode == 2 and "unknown strategy 'probe'; known: " in refused.stderr, refused.stderr
