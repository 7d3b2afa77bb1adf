"""Cancel, redelivery and results through a real worker."""

from __future__ import annotations

import re
import time
import uuid

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.context import RunContext
from covey.spec import AgentSpec
from covey.status import AgentStatus
from covey.store.outbox import Message
from covey.worker import signing


def wait_until(predicate, seconds=30.0, step=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not reached")


def test_cancel_stops_a_running_tree(client, cli):
    handle = client.submit(
        client.spec(
            "[sim:spawn width=2 depth=1] [sim:loop] [sim:latency 50] spin",
            # Room for a minute of looping: the default token cap ended it before a
            # slow machine's `covey cancel` process was up.
            budget={"max_cycles": 10_000, "max_tokens": 5_000_000},
            max_cycles=10_000,
        )
    )
    wait_until(lambda: handle.ledger().cycles_used > 5)
    proc = cli("cancel", handle.id)
    assert proc.returncode == 0, proc.stderr
    at_cancel = handle.ledger().cycles_used
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.CANCELLED
    assert {n.status for n in handle.tree()} == {"cancelled"}
    # Left alone the loop would run to 10,000 cycles; after the cancel each of the
    # three agents finishes at most the one call it had in flight.
    assert handle.ledger().cycles_used <= at_cancel + 3
    assert handle.ledger().tokens_reserved == 0
    assert cli("status", handle.id).stdout.strip() == "cancelled"


def test_a_cancel_interrupts_a_model_call_in_flight_and_charges_its_reservation(client, cli):
    handle = client.submit(client.spec("[sim:latency 60000] What is 2 + 3?", strategy="single"))
    reserved = wait_until(lambda: handle.ledger().tokens_reserved)  # the one call, in flight
    assert cli("cancel", handle.id).returncode == 0
    result = handle.result(timeout=30)  # far sooner than the call's minute
    assert result.status is AgentStatus.CANCELLED
    assert result.error.startswith("model call abandoned: job cancelled; charged the reservation: no usage came back")
    ledger = handle.ledger()
    assert (ledger.tokens_used, ledger.tokens_reserved) == (reserved, 0)  # it may have been billed: all of it


def test_a_redelivered_child_step_is_charged_once(client):
    """The same ``covey.agent`` message of a child its parent opened, delivered twice:
    it names only the agent, which runs what its ledger row holds, once."""
    job_id = f"redeliver-{uuid.uuid4().hex}"
    budget = Budget(max_tokens=100_000, max_depth=2)
    client.ledger.open_root(job_id, "root", budget)
    spec = AgentSpec(task="What is 2 + 3?")
    child = "root-sub-00000001"
    opened = client.ledger.open(job_id, ["root"], child, budget.child(), AgentTerms(spec=spec.model_dump_json()))
    assert opened.ok
    task_id = str(uuid.uuid4())
    secret = signing.shared_secret(None, client.settings.broker)
    kwargs = {"job_id": job_id, "agent_id": child}
    kwargs["sig"] = signing.sign(secret, task_id, kwargs)  # as a worker signs it
    client.redis.hset(keys.expected(job_id), child, Message("covey.agent", task_id, kwargs).dumps())  # and records it

    first = client.app.send_task("covey.agent", kwargs=kwargs, task_id=task_id).get(timeout=60)
    once = client.ledger.snapshot(job_id)
    second = client.app.send_task("covey.agent", kwargs=kwargs, task_id=task_id).get(timeout=60)
    twice = client.ledger.snapshot(job_id)

    assert first == second and (first["status"], first["output"]) == ("completed", "5")
    node = client.tree.node(job_id, child)
    assert once.tokens_used == node.usage.total_tokens > 0
    assert (twice.tokens_used, twice.cycles_used, twice.agents_spawned) == (
        once.tokens_used,
        once.cycles_used,
        once.agents_spawned,
    )


def test_a_redelivered_agent_step_is_charged_once(client):
    """The same ``covey.agent`` message delivered twice, as after a worker crash, in the
    previous release's form: the agent's context and spec, signed."""
    job_id = f"redeliver-{uuid.uuid4().hex}"
    budget = Budget(max_tokens=100_000, max_depth=1)
    client.ledger.open_root(job_id, "root", budget)
    ctx = RunContext(job_id=job_id, agent_id="root", budget=budget)
    spec = AgentSpec(task="[sim:spawn width=2 depth=1] twice")
    kwargs = {"ctx": ctx.model_dump(mode="json"), "spec": spec.model_dump(mode="json")}
    task_id = str(uuid.uuid4())
    secret = signing.shared_secret(None, client.settings.broker)
    kwargs["sig"] = signing.sign(secret, task_id, kwargs)  # as a worker signs it
    client.redis.hset(keys.expected(job_id), "root", Message("covey.agent", task_id, kwargs).dumps())  # and records it

    first = client.app.send_task("covey.agent", kwargs=kwargs, task_id=task_id).get(timeout=60)
    once = client.ledger.snapshot(job_id)
    second = client.app.send_task("covey.agent", kwargs=kwargs, task_id=task_id).get(timeout=60)
    twice = client.ledger.snapshot(job_id)

    assert first["status"] == second["status"] == "completed"
    assert first["usage"] == second["usage"]
    assert once.tokens_used == first["usage"]["total_tokens"] > 0
    assert (twice.tokens_used, twice.cycles_used, twice.agents_spawned) == (
        once.tokens_used,
        once.cycles_used,
        once.agents_spawned,
    )


def test_result_waits_and_times_out_with_a_clear_error(client, cli):
    handle = client.submit(client.spec("[sim:loop] [sim:latency 2000] slow", max_cycles=10_000))
    proc = cli("result", handle.id, "--timeout", "0.2")
    assert proc.returncode == 3
    assert re.search(r"not finished after \d+\.\ds", proc.stderr)  # the time really waited
    handle.cancel()
    assert handle.result(timeout=60).status is AgentStatus.CANCELLED


def test_a_job_past_its_timeout_ends_timed_out(cli):
    import json

    proc = cli("run", "[sim:loop] [sim:latency 200] forever", "--timeout", "1", "--json")
    result = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert result["status"] == "timed_out"
    assert result["error"] == "job deadline passed"


def test_a_tenant_scope_caps_tokens_across_jobs_and_is_spent_nearly_to_its_end(client, cli):
    tenant = f"t{uuid.uuid4().hex[:8]}"
    cap = 6000
    assert cli("scope", f"tenant:{tenant}", "--max-tokens", str(cap)).returncode == 0
    results = []
    while not results or results[-1].status is AgentStatus.COMPLETED:  # about 1,200 tokens a job
        assert len(results) < 10, "the cap never refused a job"
        results.append(client.submit(client.spec(f"What is {len(results)} + 2?", tenant=tenant)).result(timeout=60))
    last = results[-1]
    assert last.status is AgentStatus.BUDGET_EXCEEDED and f"scope tenant:{tenant}" in last.error
    (row,) = [row for row in client.ledger.scope_rows() if row.name == f"tenant:{tenant}"]
    assert row.tokens_used == sum(r.usage.total_tokens for r in results)
    # Reservations are close to what calls cost, so the tenant is refused near its cap, never past it.
    assert 5000 <= row.tokens_used <= cap


def test_a_slow_model_call_cannot_outlast_the_job_deadline(cli):
    import json

    proc = cli("run", "[sim:latency 8000] slow", "--timeout", "2", "--json")
    result = json.loads(proc.stdout)
    assert (proc.returncode, result["status"], result["error"]) == (1, "timed_out", "job deadline passed")
    assert result["usage"]["cycles"] == 1  # the call was made, cut off at the deadline
