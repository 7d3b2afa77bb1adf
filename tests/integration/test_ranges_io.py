"""Numbers within range at every door: the client, the CLI, the wire and the ledger.

An out-of-range cap or timeout is refused naming the option or field (exit 2 from
the CLI), never runs, and never reaches the worker as an ``internal error``; a
ledger row holding a number Lua wrote as a double is read, not a crash. And the
reservation holds for dense text billed a token per byte.
"""

from __future__ import annotations

import json

import pytest

from covey import InvalidSpec, keys
from covey.budgets.budget import MAX_COUNT
from covey.status import AgentStatus

HUGE = "100000000000000000000"


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"budget": {"max_tokens": 10**40}}, "budget.max_tokens"),
        ({"budget": {"max_cycles": 2**63}}, "budget.max_cycles"),
        ({"budget": {"max_agents": True}}, "budget.max_agents"),
        ({"max_call_tokens": 10**20}, "max_call_tokens"),
        ({"timeout": 1e308}, "timeout"),
        ({"timeout": float("nan")}, "timeout"),  # JSON's NaN, which Python's json reads
        ({"child_fraction": float("inf")}, "child_fraction"),
        ({"priority": 10}, "priority"),
        ({"model_params": {"seed": 2**64}}, "model_params.seed"),
    ],
)
def test_the_wire_refuses_out_of_range_numbers_naming_the_field(bare, client, spec, field):
    sent = bare.send_task("covey.run_job", kwargs={"spec": {"task": "What is 1 + 1?", **spec}})
    with pytest.raises(Exception) as caught:
        sent.get(timeout=60)
    assert type(caught.value).__name__ == "InvalidSpec"
    assert f"{field}:" in str(caught.value)
    assert client.job(sent.id).status() == "refused" and client.job(sent.id).ledger().agents == []


def test_the_worker_runs_jobs_after_refusing_bad_numbers(bare):
    sent = bare.send_task(
        "covey.run_job", kwargs={"spec": {"task": "What is 12 + 30?", "budget": {"max_tokens": MAX_COUNT}}}
    )
    assert sent.get(timeout=60)["output"] == "42"


def test_the_client_refuses_before_sending(client):
    with pytest.raises(InvalidSpec, match="budget.max_tokens: Input should be less than or equal to 9007199254740991"):
        client.submit({"task": "x", "budget": {"max_tokens": 10**40}})
    with pytest.raises(InvalidSpec, match="timeout: Input should be a finite number"):
        client.spec("x", timeout=float("inf"))


@pytest.mark.parametrize(
    "args, option",
    [
        (["--max-tokens", HUGE], "--max-tokens"),
        (["--max-cycles", str(2**63)], "--max-cycles"),
        (["--max-agents", "-1"], "--max-agents"),
        (["--max-depth", str(MAX_COUNT + 1)], "--max-depth"),
        (["--max-call-tokens", HUGE], "--max-call-tokens"),
        (["--agent-max-cycles", HUGE], "--agent-max-cycles"),
        (["--timeout", "1e308"], "--timeout"),
        (["--timeout", "inf"], "--timeout"),
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", "0"], "--timeout"),
        (["--priority", "10"], "--priority"),
        (["--priority", "-1"], "--priority"),
    ],
)
def test_the_cli_refuses_out_of_range_options_with_exit_2_naming_them(cli, args, option):
    proc = cli("run", "What is 1 + 1?", *args)
    assert proc.returncode == 2, proc.stderr
    assert f"Invalid value for '{option}'" in proc.stderr
    assert "Traceback" not in proc.stderr and "job " not in proc.stderr  # nothing was submitted


def test_the_cli_takes_the_largest_cap(cli):
    proc = cli(
        "run", "What is 1 + 1?", "--max-tokens", str(MAX_COUNT), "--timeout", "1000000000", "--priority", "9", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == "2"


def test_result_refuses_a_wait_that_is_not_a_number(cli):
    proc = cli("result", "some-job", "--timeout", "nan")
    assert proc.returncode == 2 and "Invalid value for '--timeout'" in proc.stderr


def test_scope_caps_are_bounded(cli, client):
    proc = cli("scope", "tenant:ranges", "--max-tokens", HUGE)
    assert proc.returncode == 2 and "Invalid value for '--max-tokens'" in proc.stderr
    for bad in ("-1", "2.5", HUGE):
        proc = cli("scope", "tenant:ranges", "--max-running", bad)
        assert proc.returncode == 2 and "Invalid value for '--max-running'" in proc.stderr
    assert all(row.name != "tenant:ranges" for row in client.ledger.scope_rows())
    with pytest.raises(ValueError, match="max_cycles cannot be over 9007199254740991"):
        client.ledger.set_scope("tenant:ranges", None, MAX_COUNT + 1)
    proc = cli("scope", "tenant:ranges", "--max-tokens", str(MAX_COUNT), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["tokens_limit"] == MAX_COUNT


def test_the_ledger_reads_numbers_lua_wrote_as_doubles(cli, client):
    handle = client.submit(client.spec("What is 1 + 1?"))
    assert handle.result(timeout=60).ok
    root = keys.agent(handle.id, "root")
    client.redis.hset(root, mapping={"tokens_limit": "1e+40", "cycles_limit": "9.007199254741e+15"})
    proc = cli("ledger", handle.id, "--json")
    assert proc.returncode == 0, proc.stderr
    ledger = json.loads(proc.stdout)
    assert ledger["tokens_limit"] == 10**40 and ledger["cycles_limit"] == 9007199254741000
    assert cli("ledger", handle.id).returncode == 0

    client.redis.hset(root, "tokens_limit", "lots")
    proc = cli("ledger", handle.id)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"Error: ledger of job {handle.id} unreadable: a ledger row holds 'lots' where a whole number belongs"
    )


def test_a_cjk_job_billed_a_token_per_byte_completes_within_its_reservations(client):
    task = "[sim:bill bytes] " + "請計算以下算式並解釋步驟。" * 100 + " What is 6 * 7?"
    handle = client.submit(client.spec(task, budget={"max_tokens": 100_000}))
    result = handle.result(timeout=60)
    assert (result.status, result.output) == (AgentStatus.COMPLETED, "42")
    ledger = handle.ledger()
    assert ledger.tokens_used == result.usage.total_tokens and ledger.tokens_reserved == 0


def test_a_provider_over_reporting_usage_stops_the_agent_and_is_charged(client):
    handle = client.submit(client.spec("[sim:bill over] What is 6 * 7?"))
    result = handle.result(timeout=60)
    assert result.status is AgentStatus.FAILED
    assert result.error.startswith("the provider reported ") and " over the " in result.error
    ledger = handle.ledger()
    assert ledger.tokens_used == result.usage.total_tokens > 0 and ledger.tokens_reserved == 0
    assert handle.tree()[0].error == result.error
