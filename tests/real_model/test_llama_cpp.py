"""covey against llama-cpp-python's OpenAI-compatible server and a real model.

What the server does, and covey's answer to it (docs/real-models.md): it reads
the reply cap as ``max_tokens`` alone and ignores it on its tool-choosing path,
refuses ``json_schema`` but turns a schema sent inside ``json_object`` into a
grammar, cannot stream a tool call it chose, drops ``tool`` messages from its
prompt and refuses ``content: null``. ``local`` is the server as its models file
entry speaks to it (JSON asked as ``json_object_schema``); ``deaf`` is sent the
cap as ``max_completion_tokens`` alone, which the server ignores, so only covey's
own cut of the streamed reply holds its caps, and asks for JSON in the default
mode, which the server refuses. Each test prints what it measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from covey.client import Client
from covey.config.settings import Settings
from tests.integration.conftest import ROOT, start_worker, stop_worker, wait_for_worker, worker_env

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

STORY = "Write a long, detailed story about a dragon who learns to cook."
ENTRY = """
[models.{name}]
base_url = "{base_url}"
api_key_env = "LOCAL_KEY"
model = "{model}"
tool_results = "user"                   # its function-calling template drops tool messages
body = {{ repeat_penalty = 1.0 }}       # its default 1.1 breaks the grammar of tool arguments
price = {{ input = 1.0, output = 2.0 }}  # USD per million tokens, for the cost cap
tokenizer = "server"                    # its /extras/tokenize/count: exact first-call reservations
"""
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def env(llama_server, redis_server, tmp_path_factory):
    models = tmp_path_factory.mktemp("models") / "models.toml"
    models.write_text(
        ENTRY.format(name="local", base_url=llama_server, model="smollm2")
        + 'structured = "json_object_schema"       # its grammar holds a JSON answer to the schema\n'
        # A worker keeps what it learns of a dialect per address and model id, and this
        # server serves its one model whatever the id: another id keeps deaf's its own.
        + ENTRY.format(name="deaf", base_url=llama_server, model="smollm2-deaf")
        + 'reply_cap = ["max_completion_tokens"]  # a name this server does not read\n'
    )
    variables = {"COVEY_MODELS": str(models), "LOCAL_KEY": "none", "COVEY_MODEL_TIMEOUT": "120"}
    worker = start_worker(redis_server.url, concurrency=2, **variables)
    client = Client(Settings(redis_url=redis_server.url))
    try:
        wait_for_worker(client, worker)
        yield worker_env(redis_server.url, **variables)
    finally:
        client.close()
        stop_worker(worker)


def covey(env, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "covey", *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def run(env, task: str, *flags: str) -> dict:
    proc = covey(env, "run", task, "--json", *flags)
    assert proc.stdout, proc.stderr
    result = json.loads(proc.stdout)
    print(f"\n{' '.join(flags)}: {result['status']}, {result['usage']}, {result.get('error')}")
    return result


def ledger(env, job_id: str) -> dict:
    return json.loads(covey(env, "ledger", job_id, "--json").stdout)


@pytest.mark.parametrize("model", ["local", "deaf"])
def test_a_400_token_cap_holds_and_the_reply_is_cut_at_it(env, model):
    result = run(env, STORY, "--model", model, "--strategy", "single", "--max-tokens", "400")
    spent = ledger(env, result["job_id"])
    print(f"{model}: {spent['tokens_used']} of 400 tokens")
    assert result["status"] == "budget_exceeded" and "the model's reply was cut at " in result["error"]
    assert spent["tokens_used"] <= 400 and spent["tokens_reserved"] == 0
    assert result["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize("model", ["local", "deaf"])
def test_a_cost_cap_holds_and_names_cost_as_what_was_short(env, model):
    result = run(env, STORY, "--model", model, "--strategy", "single", "--max-cost", "0.0005")
    spent = ledger(env, result["job_id"])
    print(f"{model}: ${spent['cost_used']:.6f} of $0.0005")
    assert result["status"] == "budget_exceeded" and result["cause"]["resource"] == "cost"
    assert spent["cost_used"] <= 0.0005 and spent["cost_reserved"] == 0


def test_a_call_still_streaming_at_the_jobs_deadline_is_charged_its_reservation(env):
    result = run(env, STORY, "--model", "deaf", "--strategy", "single", "--max-call-tokens", "1500", "--timeout", "4")
    assert result["status"] == "timed_out"
    shown = json.loads(covey(env, "transcript", result["job_id"], "--json").stdout)
    [call] = [event for agent in shown["transcripts"] for event in agent["events"]]
    assert call["error"].endswith("; charged the reservation: no usage came back")
    assert result["usage"]["completion_tokens"] == 1500  # what it was allowed, not the 0 it reported
    assert ledger(env, result["job_id"])["tokens_reserved"] == 0


def test_a_react_agent_calls_a_tool_and_the_result_reaches_its_next_call(env):
    task = "What is 17 * 23? Use the calculator tool."
    # At temperature 0 this model calls the tool again and again inside one request, until
    # the server's context is full (an HTTP 400); this seed answers the next call.
    flags = ("--tools", "calculator", "--max-call-tokens", "256", "--model-param", "temperature=0.7")
    flags += ("--model-param", "seed=2")
    result = run(env, task, "--model", "local", *flags)
    shown = json.loads(covey(env, "transcript", result["job_id"], "--json").stdout)
    entries = [event for agent in shown["transcripts"] for event in agent["events"]]
    tools = [e for e in entries if e["kind"] == "tool"]
    assert tools and tools[0]["tool"] == "calculator" and "391" in tools[0]["result"], entries
    later = [e for e in entries if e["kind"] == "model" and e["cycle"] > tools[0]["cycle"]]
    assert later and later[0]["error"] is None, "no model call answered after the tool's result"
    sent = [m for m in later[0]["sent"] if m.get("role") == "tool"]
    assert sent and "391" in sent[0]["content"]  # sent as a user message naming its call (tool_results)


@pytest.mark.parametrize("model, mode", [("local", "json_object_schema"), ("deaf", "tools")])
def test_a_structured_answer_comes_back_in_the_mode_the_endpoint_takes(env, model, mode):
    """``local`` asks in its grammar mode; ``deaf`` asks in ``json_schema``, is refused,
    and asks again in tools mode."""
    options = json.dumps(SCHEMA)
    task = "What is the capital of France? Answer with the city and its country."
    result = run(env, task, "--model", model, "--strategy", "single", "--option", f"output_schema={options}")
    assert result["status"] == "completed", result["error"]
    answer = json.loads(result["output"])
    assert set(answer) == {"city", "country"}
    deadline = time.monotonic() + 60  # the worker's catalog beats every third of COVEY_CATALOG_TTL
    while time.monotonic() < deadline:
        rows = {row["name"]: row for row in json.loads(covey(env, "models", "--json").stdout)}
        if rows[model]["structured"] == mode:
            break
        time.sleep(1)
    assert rows[model]["structured"] == mode  # the catalog shows the mode in use


PLAN_ENDS = ("plan refused: ", "the model's reply was cut at max_call_tokens=300", "step ")


def plan_execute(env, *flags: str) -> tuple[dict, list[dict]]:
    result = run(env, "What is 12 + 30?", "--model", "local", "--strategy", "plan_execute", *flags)
    tree = json.loads(covey(env, "tree", result["job_id"], "--json").stdout)["nodes"]
    steps = (result.get("data") or {}).get("steps", [])
    ran = [(step["id"], step["role"] or step["tool"], step["status"]) for step in steps]
    print(f"plan_execute {' '.join(flags)}: {len(tree)} agents, steps {ran}")
    print(f"  {result['status']}: {result.get('output') or result.get('error')}")
    assert ledger(env, result["job_id"])["tokens_reserved"] == 0
    return result, steps


def test_plan_execute_gets_past_a_one_step_plan_and_answers(env):
    """A plan of one step (``max_steps=1``) has no dependency to get wrong, and the
    grammar leaves SmolLM2-135M no other way to write a plan that cannot run: the
    plan is accepted, its step runs as a child, and the job answers (right or wrong)
    or ends saying why a later call failed. No tools: this server's tool-choosing
    path reads no cap and loops (docs/real-models.md)."""
    result, steps = plan_execute(env, "--max-call-tokens", "300", "--tools", "", "--option", "max_steps=1")
    assert steps and steps[0]["agent_id"] and steps[0]["role"], result  # past the plan: its step ran as a child
    if result["status"] != "completed":
        assert result["status"] == "failed" and result["error"].startswith(PLAN_ENDS), result["error"]
    else:
        assert result["output"]


def test_plan_execute_plans_within_its_schema_and_ends_saying_why(env):
    """With every default, the grammar holds each plan to its schema (no reply is off
    it), and the plans that do not run are refused for what no schema can say (an
    unknown dependency, a cycle, a duplicate id) or cut at the call's cap when the
    model repeats steps: a minority of jobs get past the plan (docs/real-models.md)."""
    result, _ = plan_execute(env, "--max-call-tokens", "300")
    for error in result["data"]["errors"] if result.get("data") else []:
        assert "schema" not in error and "not JSON" not in error, error
    if result["status"] != "completed":
        assert result["status"] in ("failed", "budget_exceeded") and result["error"].startswith(PLAN_ENDS), result


def test_a_20_question_sweep_ends_every_sample(env, tmp_path):
    data = tmp_path / "questions.jsonl"
    data.write_text("".join((ROOT / "examples/arithmetic.jsonl").read_text().splitlines(keepends=True)[:20]))
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'models = ["local"]\nstrategies = [{ name = "single", label = "single" }]\n'
        "budgets = [{ max_tokens = 4000, max_call_tokens = 64, seconds = 300 }]\n"
        'scorer = { kind = "numeric", tolerance = 1e-6 }\n'
    )
    out = tmp_path / "out"
    proc = covey(env, "sweep", str(data), "--grid", str(grid), "--out", str(out), "--max-in-flight", "2", "--json")
    print(proc.stdout[-2000:], proc.stderr[-2000:])
    assert proc.returncode in (0, 1), proc.stderr
    [row] = json.loads(proc.stdout)
    assert row["units"] == 20 and sum(row["statuses"].values()) == 20, row
    assert (out / "summary.png").exists()
