"""Tenants prove who they are: a tenant given a key (``covey tenant create``) runs
only jobs signed with it, through the client, the CLI's environment or a bare
``send_task``, and only the tools, models and strategies the key allows; a job
refused so opens no agent and calls no model. The key is shown once and kept
nowhere in Redis."""

from __future__ import annotations

import uuid

import pytest

from covey import keys, tenant_keys, wire
from covey.client import Client
from covey.client.errors import JobRefused
from tests.integration.test_rate_windows import new_tenant
from tests.integration.test_secrets import values

SECONDS = 60


def issued(cli, name: str, *limits: str) -> str:
    made = cli("tenant", "create", name, *limits)
    assert made.returncode == 0, made.stderr
    assert f"tenant {name}: key {tenant_keys.fingerprint(made.stdout.strip())} issued" in made.stderr
    return made.stdout.strip()


def keyed(settings, key: str) -> Client:
    return Client(settings.model_copy(update={"tenant_key": key}))


def refused(client: Client, handle, why: str) -> None:
    """The job failed naming ``why``, before its root opened: no agent, no ledger row, no model call."""
    with pytest.raises(JobRefused, match=why):
        handle.result(timeout=SECONDS)
    assert handle.tree() == [] and not client.redis.exists(keys.agent(handle.id, "root"))


def test_a_tenant_with_a_key_runs_only_the_jobs_signed_with_it(cli, client, settings, bare):
    name = new_tenant()
    key = issued(cli, name)
    assert key.startswith(tenant_keys.PREFIX)
    signed = keyed(settings, key)
    unsigned_said = f"tenant '{name}' has a key, and the job is not signed with it"
    try:
        assert signed.run(signed.spec("What is 2 + 3?", tenant=name), timeout=SECONDS).output == "5"
        refused(client, client.submit(client.spec("What is 2 + 3?", tenant=name)), unsigned_said)

        other = keyed(settings, issued(cli, new_tenant()))  # another tenant's own key
        try:
            refused(client, other.submit(other.spec("What is 2 + 3?", tenant=name)), "signature is not made with it")
        finally:
            other.close()

        job_id, spec = str(uuid.uuid4()), {"task": "What is 4 + 4?", "tenant": name}
        envelope = {"spec": spec, "signature": tenant_keys.sign(key, job_id, wire.digest(spec))}
        assert bare.send_task(wire.RUN_JOB, kwargs=envelope, task_id=job_id).get(timeout=SECONDS)["output"] == "8"
        unsigned = bare.send_task(wire.RUN_JOB, kwargs={"spec": spec})
        refused(client, client.job(unsigned.id), unsigned_said)

        assert key not in values(client.redis)
        issued(cli, name)  # a new key: the old one stops working
        refused(client, signed.submit(signed.spec("What is 2 + 3?", tenant=name)), "signature is not made with it")
    finally:
        signed.close()


def test_a_tenant_key_limits_the_tools_models_and_strategies_its_jobs_use(cli, settings):
    name = new_tenant()
    key = issued(cli, name, "--tools", "calculator", "--models", "sim", "--strategies", "react,single")
    c = keyed(settings, key)
    try:
        assert c.run(c.spec("What is 6 * 7?", tenant=name), timeout=SECONDS).output == "42"  # its tools: the key's
        for fields, why in (
            ({"strategy": "debate"}, "may not use strategy 'debate' \\(its key allows: react, single\\)"),
            ({"tools": ["read_file"]}, "may not use tool 'read_file' \\(its key allows: calculator\\)"),
        ):
            refused(c, c.submit(c.spec("What is 6 * 7?", tenant=name, **fields)), why)
    finally:
        c.close()
    other = new_tenant()
    c = keyed(settings, issued(cli, other, "--models", "gpt-4o"))
    try:
        refused(c, c.submit(c.spec("What is 6 * 7?", tenant=other)), "may not use model 'sim'")
    finally:
        c.close()


def test_tenant_create_refuses_a_bad_name_or_an_unknown_strategy_in_one_line(cli):
    for args, said in (
        (("tenant:acme",), "Invalid value for NAME: 1 to 64 of"),
        (("acme", "--strategies", "reactt"), "unknown strategy 'reactt'"),
    ):
        made = cli("tenant", "create", *args)
        assert made.returncode == 2 and said in made.stderr and "Traceback" not in made.stderr


def test_an_agent_job_of_a_tenant_whose_key_limits_tools_is_offered_the_agents_own_alone(cli, settings, tmp_path):
    """A job naming no tools gets the key's built-ins; an agent of a framework declares
    its own, and a job of it naming none is offered those alone (docs/agents.md)."""
    name = new_tenant()
    c = keyed(settings, issued(cli, name, "--tools", "calculator"))
    task = f'Count. [sim:call tally {{"path": "{tmp_path / "runs.txt"}"}}]'
    try:
        handle = c.submit(c.spec(task, tenant=name, agent="tests.agents.sdk_agents:counted"))
        assert handle.result(timeout=SECONDS).output == "tallied 1"
    finally:
        c.close()
    assert [e.tools for e in handle.transcript().events if e.kind == "model"] == [["tally"]] * 2
