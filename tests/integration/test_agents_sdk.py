"""An OpenAI Agents SDK agent as a covey job, through a real worker, Redis and the sim.

The agent is imported by path on the worker (examples/agents on its path, as a
team installs its package beside the workers); the job is sent from the client,
the CLI and a bare Celery client; a worker killed between a tool call and the
next model call leaves a job that another worker completes by replay, the tool
run once and the ledger as a clean run's (a pydantic-ai agent's likewise).
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing

import pytest
from celery import Celery

from covey.client import Client
from covey.config.settings import Settings
from covey.status import CauseKind
from covey.sweeps import run_sweep
from tests.images import png
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env
from tests.integration.test_durability import wait_until
from tests.integration.test_lost_messages import QUICK, died
from tests.redis_server import RedisServer

TRIAGE = "covey_example_agents.triage:triage"
REFUND = (
    '[sim:call lookup_order {"order_id": "A1"}] [sim:then transfer_to_billing {}] [sim:then refund {"order_id": "A1"}]'
)
PATH = f"{ROOT}:{ROOT}/examples/agents"  # the workers import the agents from here


@pytest.fixture(scope="module")
def server():
    with RedisServer() as redis_server:
        yield redis_server


@pytest.fixture(scope="module")
def client(server):
    worker = start_worker(server.url, PYTHONPATH=PATH, COVEY_TOOLS="tests.integration.file_tools")
    with closing(Client(Settings(redis_url=server.url))) as c:
        try:
            wait_for_worker(c, worker)
            yield c
        finally:
            stop_worker(worker)


def covey(server: RedisServer, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(server.url, PYTHONPATH=PATH),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_a_triage_agent_with_a_tool_and_a_handoff_runs_every_call_through_the_ledger_transcript_and_events(client):
    handle = client.submit(client.spec(REFUND, agent=TRIAGE))
    result = handle.result(timeout=90)
    assert result.ok, result.error
    assert result.output == "refund of order A1 started"  # billing's tool, reached through the handoff
    ledger = handle.ledger()
    assert (ledger.cycles_used, ledger.tool_calls_used, ledger.tokens_reserved) == (4, 2, 0)
    assert ledger.tokens_used == result.usage.total_tokens > 0
    seen = handle.transcript().events
    offered = [tuple(e.tools) for e in seen if e.kind == "model"]
    triage = ("lookup_order", "ask_policy", "translate", "transfer_to_billing")
    assert offered == [triage] * 2 + [("refund",)] * 2
    assert [e.kind for e in seen].count("tool") == 2
    kinds = [e.type.value for e in handle.events()]
    assert kinds.count("model.finished") == 4 and kinds.count("tool.finished") == 2


ASKING = (
    '[sim:call lookup_order {"order_id": "A1"}] [sim:then ask_policy {"input": "Refund window?"}] '
    '[sim:then translate {"input": "thirty days"}] [sim:then transfer_to_billing {}] '
    '[sim:then refund {"order_id": "A1"}]'
)


def test_as_tool_agents_run_as_covey_children_in_the_tree_and_answer_their_calls(client):
    handle = client.submit(client.spec(ASKING, agent=TRIAGE, budget={"max_tokens": 40_000}))
    result = handle.result(timeout=90)
    assert result.ok and result.output == "refund of order A1 started", result.error
    nodes = {n.role: n for n in handle.tree()}
    assert set(nodes) == {"root", "ask_policy", "translate"}
    for role, answer in (("ask_policy", "done: Refund window?"), ("translate", "done: thirty days")):
        child = nodes[role]
        assert (child.depth, child.parent_id, child.status.value, child.output) == (1, "root", "completed", answer)
    ledger = handle.ledger()
    assert ledger.agents_spawned == 2 and ledger.tokens_used == result.usage.total_tokens <= 40_000


@pytest.mark.slow
def test_parallel_as_tool_calls_are_sibling_children_and_no_jobs_cap_is_exceeded_across_its_tree(server):
    """Twenty jobs at once on four slots, each capped: a root and its two parallel children
    share the job's tokens, and the ledger refuses what would pass the cap: 0 over."""
    queue = "agents-caps"
    worker = start_worker(server.url, concurrency=4, hostname=f"{queue}@%h", COVEY_QUEUE=queue, PYTHONPATH=PATH)
    task = '[sim:parallel 2] [sim:call ask_policy {"input": "Refund window?"}]'
    caps = [1_500 + 250 * i for i in range(19)] + [40_000]
    with closing(Client(Settings(redis_url=server.url, queue=queue))) as client:
        try:
            wait_for_worker(client, worker)
            handles = [client.submit(client.spec(task, agent=TRIAGE, budget={"max_tokens": cap})) for cap in caps]
            results = [h.result(timeout=180) for h in handles]
            ledgers = [h.ledger() for h in handles]
            trees = [h.tree() for h in handles]
        finally:
            stop_worker(worker)
    over = [(cap, ledger.tokens_used) for cap, ledger in zip(caps, ledgers) if ledger.tokens_used > cap]
    assert over == []
    assert all(ledger.tokens_reserved == 0 for ledger in ledgers)
    assert all(r.usage.total_tokens == ledger.tokens_used for r, ledger in zip(results, ledgers))
    assert all([n.role for n in tree if n.depth == 1] == ["ask_policy", "ask_policy"] for tree in trees)
    assert results[-1].ok and results[-1].output == "done: Refund window?", results[-1].error  # the uncapped one
    assert any(r.status.value == "budget_exceeded" or r.wrapped_up for r in results[:5])  # the caps did bite


def test_parallel_as_tool_children_run_on_another_worker_process_and_show_under_their_parent_in_covey_tree(
    server, tmp_path
):
    """Two workers of one slot each; the two parallel children hold their slots until
    both have begun (``sdk_agents.meeting``), so they ran at once on the two processes,
    one of them not the root's. Each agent.running event names the process that took
    the agent up."""
    queue = "agents-two"
    env = {"COVEY_QUEUE": queue, "PYTHONPATH": PATH, "SDK_AGENTS_MEET": str(tmp_path / "met.txt")}
    workers = [start_worker(server.url, hostname=f"{queue}{i}@%h", **env) for i in range(2)]
    task = '[sim:parallel 2] [sim:call meet {"input": "Hello?"}]'
    with closing(Client(Settings(redis_url=server.url, queue=queue))) as client:
        try:
            for worker in workers:
                wait_for_worker(client, worker)
            handle = client.submit(client.spec(task, agent="tests.agents.sdk_agents:meeting"))
            result = handle.result(timeout=120)
            running = [e for e in handle.events() if e.type.value == "agent.running"]
        finally:
            for worker in workers:
                stop_worker(worker)
    assert result.ok, result.error
    first = {}
    for event in running:
        first.setdefault(event.agent_id, event.worker)
    root = first.pop("root")
    assert root is not None and len(first) == 2 and len(set(first.values())) == 2, (root, first)
    assert {w.split(":")[-1] for w in first.values()} == set((tmp_path / "met.txt").read_text().split())
    shown = covey(server, "tree", handle.id)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line for line in shown.stdout.splitlines()[1:]}
    assert rows["root"].startswith("root ") and set(rows) == {"root", *first}, shown.stdout
    for child in first:  # one level in, under the root
        assert rows[child].startswith(f"  {child} ") and rows[child].split()[1:3] == ["meet", "completed"]


def test_on_a_gevent_pool_agents_and_their_tools_run_in_loops_of_their_own(server):
    """Greenlets share a thread, and asyncio's running loop with it: each run and each
    SDK tool gets a native thread and a loop of its own (covey.agents.loops)."""
    queue = "agents-gevent"
    worker = start_worker(
        server.url, pool="gevent", concurrency=4, hostname=f"{queue}@%h", COVEY_QUEUE=queue, PYTHONPATH=PATH
    )
    with closing(Client(Settings(redis_url=server.url, queue=queue))) as client:
        try:
            wait_for_worker(client, worker)
            handles = [client.submit(client.spec(ASKING, agent=TRIAGE)) for _ in range(3)]
            results = [h.result(timeout=120) for h in handles]
        finally:
            stop_worker(worker)
    assert [(r.status.value, r.output) for r in results] == [("completed", "refund of order A1 started")] * 3
    assert all(len(h.tree()) == 3 for h in handles)


def test_covey_tools_a_job_names_are_offered_beside_the_agents_own_and_run_through_covey(client):
    task = '[sim:call calculator {"expression": "2 + 3"}] [sim:then lookup_order {"order_id": "A1"}]'
    handle = client.submit(client.spec(task, agent=TRIAGE, tools=["calc*"]))
    result = handle.result(timeout=90)
    assert result.ok and result.output == "shipped on Monday", result.error
    seen = handle.transcript().events
    triage = ("lookup_order", "ask_policy", "translate", "calculator", "transfer_to_billing")
    assert [tuple(e.tools) for e in seen if e.kind == "model"] == [triage] * 3
    finished = [(e.tool, e.result) for e in handle.events() if e.type.value == "tool.finished"]
    assert finished == [("calculator", "5"), ("lookup_order", "shipped on Monday")]
    assert handle.ledger().tool_calls_used == 2


@pytest.mark.parametrize(
    ("agent", "task", "tools"),
    [
        (TRIAGE, 'Draw the sales. [sim:call chart {"label": "sales"}]', ["chart"]),  # covey's tool: an Image
        ("tests.agents.sdk_agents:plotting", 'Plot the sales. [sim:call plot {"label": "sales"}]', None),  # the SDK's
    ],
)
def test_a_tools_image_reaches_the_agents_next_model_call_and_stays_in_the_workspace(client, agent, task, tools):
    handle = client.submit(client.spec(task, agent=agent, **({} if tools is None else {"tools": tools})))
    result = handle.result(timeout=90)
    drawn = png(9, 3)
    assert result.ok, result.error
    assert result.output.endswith(f"(saw [image image/png 9x3, {len(drawn)} bytes])"), result.output
    [kept] = [path for path in handle.files() if path.startswith("images/")]
    assert kept in result.output and handle.get_file(kept) == drawn


def test_an_sdk_tool_that_needs_approval_waits_off_its_slot_and_runs_once_approved(client, tmp_path):
    counter = tmp_path / "runs.txt"
    task = f'Count. [sim:call tally {{"path": "{counter}"}}]'
    job = client.submit(client.spec(task, agent="tests.agents.sdk_agents:counted", approve=["tally"]))
    wait_until(lambda: job.pending() and job.status() == "waiting", "the tool call to wait for a decision")
    assert not counter.exists()  # not run before a person decides
    (asked,) = job.pending()
    assert asked.tool == "tally"
    job.approve(asked.call_id)
    result = job.result(timeout=90)
    assert result.ok and result.output == "tallied 1", result.error
    assert counter.read_text().splitlines() == ["run"]


def test_a_sweep_grid_names_two_agents_and_compares_their_scores(server, client, tmp_path):
    """The triage agent answers with its tool's text; the summary agent with its typed
    output's JSON: scored exactly against the tool's text, one scores 1 and the other 0."""
    data = tmp_path / "orders.jsonl"
    lines = [
        {"id": i, "input": '[sim:call lookup_order {"order_id": "A1"}]', "target": "shipped on Monday"}
        for i in range(3)
    ]
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    grid = tmp_path / "agents.toml"
    grid.write_text(f'agents = ["{TRIAGE}", "covey_example_agents.triage:summary"]\nscorer = "exact"\n')
    outcome = run_sweep(data, grid, tmp_path / "out", settings=Settings(redis_url=server.url, model="sim"))
    assert outcome.total == 6
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    scores = {(r["config"], r["score"]) for r in rows}
    assert scores == {("default/triage", 1.0), ("default/summary", 0.0)}, rows


def test_the_cli_runs_an_agent_by_path_and_refuses_a_path_that_holds_no_agent(server, client):
    done = covey(server, "run", "--agent", TRIAGE, "--json", REFUND)
    assert done.returncode == 0, done.stderr
    assert '"output": "refund of order A1 started"' in done.stdout
    refused = covey(server, "run", "--agent", "tests.agents.sdk_agents:not_an_agent", "x")
    assert refused.returncode == 2
    assert (
        "agent 'tests.agents.sdk_agents:not_an_agent' is a str, not an Agents SDK or pydantic-ai Agent"
        in refused.stderr
    )


def test_a_bare_celery_client_sends_an_agent_job_and_one_no_worker_can_load_fails_invalid_spec(server, client):
    app = Celery("elsewhere", broker=server.url, backend=server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    try:
        sent = app.send_task("covey.run_job", kwargs={"spec": {"task": REFUND, "agent": TRIAGE}}, queue="covey")
        assert sent.get(timeout=90)["output"] == "refund of order A1 started"
        lost = app.send_task(
            "covey.run_job", kwargs={"spec": {"task": "x", "agent": "gone.module:agent"}}, queue="covey"
        )
        ended = lost.get(timeout=90, propagate=False)
    finally:
        app.close()
    assert ended["status"] == "failed" and ended["cause"]["kind"] == "invalid_spec"
    assert "agent 'gone.module:agent': cannot import module 'gone.module'" in ended["error"]


def test_a_typed_output_comes_back_to_the_caller_as_its_type(client):
    sys.path.insert(0, f"{ROOT}/examples/agents")
    try:
        from covey_example_agents.triage import OrderSummary
    finally:
        sys.path.remove(f"{ROOT}/examples/agents")
    result = client.submit(client.spec("Where is A1?", agent="covey_example_agents.triage:summary")).result(timeout=90)
    summary = result.output_as(OrderSummary)
    assert isinstance(summary, OrderSummary) and summary.order_id and result.data == summary.model_dump()


def counting(path) -> str:
    return f'Count. [sim:call tally {{"path": "{path}"}}]'


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["tests.agents.sdk_agents:counted", "tests.agents.pai_agents:counted"])
def test_a_worker_killed_after_a_tool_call_leaves_a_job_another_completes_by_replay_charged_as_a_clean_run(
    tmp_path, agent
):
    """SIGKILL after the tool's result is kept, before the next model call: another worker
    replays the settled model call and the tool's result, and calls the model only anew;
    an Agents SDK agent and a pydantic-ai one alike."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    killed_runs, clean_runs = tmp_path / "a" / "runs.txt", tmp_path / "b" / "runs.txt"  # names of one length
    with RedisServer() as server, closing(Client(Settings(redis_url=server.url))) as client:
        first = start_worker(server.url, **QUICK, PYTHONPATH=PATH, COVEY_FAULT="after_tool:kill")
        wait_for_worker(client, first)
        handle = client.submit(client.spec(counting(killed_runs), agent=agent))
        died(first)
        assert killed_runs.read_text().splitlines() == ["run"]  # the tool ran, then the worker died
        second = start_worker(server.url, **QUICK, PYTHONPATH=PATH)
        try:
            result = handle.result(timeout=120)
            clean = client.submit(client.spec(counting(clean_runs), agent=agent))
            clean_result = clean.result(timeout=90)
        finally:
            stop_worker(second)
        killed, fresh = handle.ledger(), clean.ledger()
    assert result.ok and result.output == "tallied 1", result.error
    assert killed_runs.read_text().splitlines() == ["run"]  # never run again
    assert clean_result.ok and clean_result.output == "tallied 1"
    assert (killed.tokens_used, killed.cycles_used, killed.tool_calls_used) == (
        fresh.tokens_used,
        fresh.cycles_used,
        fresh.tool_calls_used,
    )
    assert killed.tokens_reserved == fresh.tokens_reserved == 0


@pytest.mark.slow
def test_an_agent_that_takes_another_path_on_replay_fails_nondeterministic_naming_the_call(tmp_path):
    drift = tmp_path / "instructions.txt"
    drift.write_text("Count with the tally tool.")
    env = {**QUICK, "PYTHONPATH": PATH, "SDK_AGENTS_DRIFT": str(drift)}
    with RedisServer() as server, closing(Client(Settings(redis_url=server.url))) as client:
        first = start_worker(server.url, **env, COVEY_FAULT="after_tool:kill")
        wait_for_worker(client, first)
        handle = client.submit(client.spec(counting(tmp_path / "runs.txt"), agent="tests.agents.sdk_agents:drifting"))
        died(first)
        drift.write_text("Count twice.")  # the agent's code reads other instructions on the next worker
        second = start_worker(server.url, **env)
        try:
            result = handle.result(timeout=120)
        finally:
            stop_worker(second)
    assert result.status == "failed"
    assert (result.cause.kind, result.cause.call) == (CauseKind.NONDETERMINISTIC, "root:1")
