"""Agents that use the user's own tools, through a real worker and a real Redis.

The worker serves the example package's ``lookup_weather`` (installed as a user
would, found through its ``covey.tools`` entry point) and the tools of
``tests.integration.served_tools`` (through ``COVEY_TOOLS``). The sim's
``[sim:call NAME {...}]`` makes the model call a tool over the real SDK path,
then answer with what the tool said: a tool's error is the agent's answer, so
each test reads what the model was handed.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from celery import Celery

from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from covey.spec import InvalidSpec
from covey.status import CauseKind, Resource
from covey.tools.policy import capped
from covey.tools.registry import DEFAULT_TOOLS
from covey.tools.tool import DEFAULT_MAX_OUTPUT, ToolContext
from tests.integration.conftest import (
    ROOT,
    SIMHTTP,
    called,
    served_over_http,
    start_sim_server,
    start_worker,
    stop_worker,
    wait_for_worker,
    worker_env,
)
from tests.integration.served_tools import HUGE_BYTES
from tests.integration.test_lost_messages import died, finished_by_another, killed_at
from tests.redis_server import RedisServer

WEATHER = 'What is the weather in Paris? [sim:call lookup_weather {"city": "Paris"}]'
PARIS = '{"city":"Paris","temperature_c":18.5,"sky":"cloudy"}'
SERVED = "tests.integration.served_tools"


def install_example(target: Path) -> None:
    """``pip install ./examples/tools``, into ``target`` instead of the environment every test shares."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), "examples/tools"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> str:
    """A PYTHONPATH on which the example package and its entry point are found."""
    target = tmp_path_factory.mktemp("example-tools")
    install_example(target)
    return f"{target}:{ROOT}"


@pytest.fixture(scope="module")
def server():
    with RedisServer() as s:
        yield s


@pytest.fixture(scope="module")
def tools_env(example, server, tmp_path_factory):
    """The worker's tools, and ``simhttp``: the sim served over HTTP by ``covey sim-server``."""
    sim, base_url = start_sim_server(server.url)
    yield {
        "COVEY_TOOLS": SERVED,
        "COVEY_TOOL_TIMEOUTS": '{"hang": 1}',
        "PYTHONPATH": example,
        **served_over_http(tmp_path_factory.mktemp("models"), base_url),
    }
    stop_worker(sim)


@pytest.fixture(scope="module")
def client(server, tools_env):
    c = Client(Settings(redis_url=server.url))
    worker = start_worker(server.url, **tools_env)
    wait_for_worker(c, worker)
    yield c
    stop_worker(worker)
    c.close()


def covey(server, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "covey", *args],
        env=worker_env(server.url, **env),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def answer(client: Client, task: str, **fields) -> tuple[str, object]:
    """The output of ``task``, its job naming the tools it calls unless ``fields`` say which."""
    result = client.submit(client.spec(task, **{"tools": called(task), **fields})).result(timeout=90)
    assert result.status == "completed", result.error
    return result.output, result


def test_a_react_agent_answers_through_a_function_tool(client):
    output, result = answer(client, WEATHER)
    assert output == PARIS  # the pydantic model the tool returned, as JSON
    assert result.usage.tool_calls == 1 and result.usage.cycles == 2


def test_the_same_job_from_the_cli(client, server):
    proc = covey(server, "run", WEATHER, "--tools", "lookup_weather,finish")
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines())
    assert lines["output"] == PARIS
    assert ", 1 tool calls," in lines["usage"]


def test_the_same_job_from_a_bare_celery_client(client, server):
    app = Celery("elsewhere", broker=server.url, backend=server.url)
    app.conf.update(task_serializer="json", accept_content=["json"], result_accept_content=["json"])
    try:
        spec = {"task": WEATHER, "tools": ["lookup_weather"]}
        result = app.send_task("covey.run_job", kwargs={"spec": spec}, queue="covey").get(timeout=90)
    finally:
        app.close()
    assert (result["status"], result["output"], result["usage"]["tool_calls"]) == ("completed", PARIS, 1)


@pytest.mark.parametrize(
    "call, said",
    [
        # the exception's type and message, redacted, never a traceback
        ('explode {"reason": "boom"}', "error: RuntimeError: exploded: boom with api_key=***"),
        # its timeout is the worker's COVEY_TOOL_TIMEOUTS, not the 30 s it was registered with
        ('hang {"seconds": 600}', "error: ToolTimeout: tool 'hang' did not return within its timeout of 1s"),
        ('add {"a": "one", "b": 2}', "error: tool 'add': argument a: 'one' is not of type 'integer'"),
        ('add {"a": 1}', "error: tool 'add': 'b' is a required property"),
        (
            'add {"a": 1, "b": 2, "c": 3}',
            "error: tool 'add': Additional properties are not allowed ('c' was unexpected)",
        ),
        (
            'lookup_weather {"city": "Atlantis"}',
            "error: LookupError: no weather for 'Atlantis'; known: Paris, Lisbon, Oslo",
        ),
    ],
)
def test_a_tool_that_goes_wrong_hands_the_model_an_error_and_the_agent_goes_on(client, call, said):
    output, result = answer(client, f"Try it. [sim:call {call}]")
    assert output == said
    assert result.usage.tool_calls == 1


def test_an_async_tool_past_its_timeout_is_cancelled_and_the_agent_goes_on(client):
    output, _ = answer(client, 'Try it. [sim:call hang_async {"seconds": 600}]')
    assert output.startswith("error: ") and "Timeout" in output


def test_a_tool_call_does_not_outlive_the_agents_timeout(client):
    """The tool may take 30 s; the agent has 2: the call is cut then, and the agent ends timed out."""
    spec = client.spec('Nap. [sim:call slumber {"seconds": 600}]', tools=["slumber"], timeout=2)
    result = client.submit(spec).result(timeout=90)
    assert result.status == "timed_out"
    assert result.error == "agent timeout of 2.0s passed"
    assert result.usage.tool_calls == 1


def test_ten_megabytes_come_back_cut_to_the_tools_cap_with_a_note(client):
    output, _ = answer(client, "Try it. [sim:call huge]", max_call_tokens=20_000)  # the sim answers all it read
    assert output == capped("x" * HUGE_BYTES, DEFAULT_MAX_OUTPUT)
    assert output.endswith(
        f"[output cut: {HUGE_BYTES - DEFAULT_MAX_OUTPUT} of {HUGE_BYTES} bytes not shown (max_output=65536)]"
    )


def test_a_return_value_is_text_for_the_model(client):
    output, _ = answer(client, 'Add. [sim:call add {"a": 2, "b": 40}]')
    assert json.loads(output) == {"sum": 42}


def test_a_job_naming_no_tools_is_offered_covey_s_built_ins_alone_and_star_offers_every_served_tool(client):
    """A worker's own tools (here every tool of tests.integration.served_tools) are
    offered only to a job that names them: by name, by pattern, or ``*``."""

    def offered(**fields) -> set[str]:
        handle = client.submit(client.spec("What is 2 + 2?", **fields))
        assert handle.result(timeout=90).ok
        return {name for e in handle.transcript().events if e.kind == "model" for name in e.tools}

    served = {tool.name for entry in client.catalog.entries() for tool in entry.tools}
    assert {"lookup_weather", "tally", "nap"} <= served
    assert offered() == set(DEFAULT_TOOLS)
    assert offered(tools=["*"]) == served
    assert offered(tools=["lookup_*", "calculator"]) == {"lookup_weather", "calculator"}


def test_a_tool_no_worker_serves_is_refused_at_submit_naming_it(client, server):
    """The workers' catalog answers before anything is queued (the worker's own
    refusal, for a client that bypasses this check, is in test_catalog)."""
    refused = "tool 'lookup_tides' is served by no worker on queue 'covey'; served: .*lookup_weather"
    with pytest.raises(InvalidSpec, match=refused):
        client.submit(client.spec("x", tools=["lookup_tides", "calculator"]))
    proc = covey(server, "run", "x", "--tools", "lookup_tides")
    assert proc.returncode == 2 and "tool 'lookup_tides' is served by no worker" in proc.stderr


def test_tools_named_by_a_pattern_are_offered_and_one_that_matches_nothing_served_is_refused(client, server):
    handle = client.submit(client.spec(WEATHER, tools=["lookup_*", "finish"], deny=["*_tides"]))
    assert handle.result(timeout=90).ok
    offered = {tuple(e.tools) for e in handle.transcript().events if e.kind == "model"}
    assert offered == {("finish", "lookup_weather")}
    with pytest.raises(InvalidSpec, match=r"tool 'inv__\*' is served by no worker on queue 'covey'"):
        client.submit(client.spec("x", tools=["inv__*"]))
    proc = covey(server, "run", "x", "--tools", "calc*,inv__*")
    assert proc.returncode == 2 and "tool 'inv__*' is served by no worker" in proc.stderr


@pytest.mark.parametrize(
    "narrowed",
    [
        {"tools": ["spawn_agents", "finish", "lookup_weather"], "deny": ["lookup_weather"]},
        {"tools": ["spawn_agents", "finish"]},
    ],
)
def test_a_child_gets_no_function_tool_its_parent_was_not_offered(client, narrowed):
    """Deny rules are inherited and a child's tools are cut to its parent's, for a user's tool as for a built-in:
    the child's model is not offered lookup_weather, so its call of it is refused (the sim's 400)."""
    output, _ = answer(client, f"[sim:spawn width=1 depth=1] {WEATHER}", budget={"max_depth": 1}, **narrowed)
    assert output.startswith("leaves=0 (1 not completed: ")
    assert "tool 'lookup_weather' is not offered" in output


def test_the_sim_over_http_refuses_a_call_of_a_tool_it_was_not_offered_naming_it(client):
    spec = client.spec(WEATHER, model=SIMHTTP, tools=["lookup_weather"], deny=["lookup_weather"])
    result = client.submit(spec).result(timeout=90)
    assert result.status == "failed"
    assert "tool 'lookup_weather' is not offered" in result.error


@pytest.mark.parametrize(
    "command",
    [["-m", "covey", "worker"], ["-m", "celery", "-A", "covey", "worker", "--pool", "solo"]],
    ids=["covey-worker", "celery-worker"],
)
def test_a_worker_whose_tools_do_not_import_stops_with_one_line_naming_the_path(server, command):
    proc = subprocess.run(
        [sys.executable, *command],
        env=worker_env(server.url, COVEY_TOOLS="calculator_extras,tests.integration.served_tools"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "COVEY_TOOLS: cannot import 'calculator_extras': ModuleNotFoundError: No module named 'calculator_extras'"
        )
    )


def test_a_jobs_tool_call_cap_stops_it_budget_exceeded(client):
    handle = client.submit(client.spec(WEATHER, tools=["lookup_weather"], budget={"max_tool_calls": 0}))
    result = handle.result(timeout=90)
    assert result.status == "budget_exceeded"
    assert (result.cause.kind, result.cause.resource) == (CauseKind.BUDGET, Resource.TOOL_CALLS)
    assert "max_tool_calls=0" in result.error
    assert (handle.ledger().tool_calls_used, handle.ledger().tool_calls_limit) == (0, 0)


def killed_at_a_tool(server: RedisServer, client: Client, fault: str, task: str, example: str):
    """``task`` sent to a worker serving the test tools, armed to die at ``fault``; its
    handle once the worker died."""
    first = killed_at(server, client, fault, COVEY_TOOLS=SERVED, PYTHONPATH=example)
    handle = client.submit(client.spec(task, tools=called(task)))
    died(first)
    return handle


@pytest.mark.slow
def test_a_tool_called_before_a_kill_runs_once(tmp_path, example):
    """The worker dies (SIGKILL) after the tool returned and its result was kept, before
    the step's ack; another worker takes the step up again and replays the result:
    the tool's own counter shows one run, and the answer is that run's."""
    counter = tmp_path / "runs.txt"
    with RedisServer() as server, closing(Client(Settings(redis_url=server.url))) as client:
        handle = killed_at_a_tool(
            server, client, "after_tool:kill", f'Count. [sim:call tally {{"path": "{counter}"}}]', example
        )
        assert len(counter.read_text().splitlines()) == 1  # it ran, then the worker died
        result = finished_by_another(server, handle, 120, COVEY_TOOLS=SERVED, PYTHONPATH=example)
    runs = counter.read_text().splitlines()
    assert len(runs) == 1, runs
    job_id, agent_id, call_id = runs[0].split()
    assert (job_id, agent_id) == (handle.id, "root")
    assert result.ok and result.output == f"tallied {call_id}"
    assert result.usage.tool_calls == 1


@pytest.mark.slow
def test_calls_of_one_reply_cut_off_by_a_kill_run_again_and_the_kept_one_does_not(tmp_path, example):
    """Three calls in one reply, at once; the worker dies (SIGKILL) as the first result
    is kept. Another takes the step up: the kept call replays, the others run again
    under their own call ids, and each is counted once."""
    counter = tmp_path / "runs.txt"
    task = f'Count. [sim:parallel 3] [sim:call tally {{"path": "{counter}"}}]'
    with RedisServer() as server, closing(Client(Settings(redis_url=server.url))) as client:
        handle = killed_at_a_tool(server, client, "after_tool:kill:1", task, example)
        kept = [k.rpartition(":tool:")[2] for k in client.redis.hkeys(keys.replies(handle.id, "root")) if ":tool:" in k]
        result = finished_by_another(server, handle, 120, COVEY_TOOLS=SERVED, PYTHONPATH=example)
    runs = [line.split()[2] for line in counter.read_text().splitlines()]
    assert len(kept) == 1 and runs.count(kept[0]) == 1, (kept, runs)  # kept before the kill: never run again
    assert len(set(runs)) == 3
    assert result.ok and result.usage.tool_calls == 3


def readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Your own tools\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.slow
def test_the_readme_commands_work_as_written(tmp_path):
    """The section's shell block, line by line; only ``pip install`` goes to a
    directory of its own (``--target``), not the environment every test shares."""
    install, start, run = re.search(r"```sh\n(.*?)```", readme_section(), re.S)[1].strip().splitlines()
    assert install == "pip install ./examples/tools" and start == "covey worker &"
    subprocess.run(f"{install} -q --no-deps --target {tmp_path}", shell=True, cwd=ROOT, check=True, timeout=300)
    with RedisServer() as server:
        env = worker_env(server.url, PYTHONPATH=f"{tmp_path}:{ROOT}")
        worker = subprocess.Popen(shlex.split(start.removesuffix("&")), env=env, cwd=ROOT)
        try:
            proc = subprocess.run(run, shell=True, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        finally:
            stop_worker(worker)
    assert proc.returncode == 0, proc.stderr
    assert dict(line.split(None, 1) for line in proc.stdout.splitlines())["output"] == PARIS


def test_the_readme_tool_counts_words_of_the_workspace(tmp_path):
    source = re.search(r"```python\n(.*?)```", readme_section(), re.S)[1]
    (tmp_path / "readme_tools.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        from readme_tools import word_count  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))

    class Files:
        def read(self, path: str) -> str:
            return {"notes.md": "three short words"}[path]

    assert word_count.timeout == 10 and list(word_count.parameters["properties"]) == ["path"]
    assert word_count.run({"path": "notes.md"}, ToolContext("j", "root", "c", Files())) == '{"words":3}'


def test_the_calls_of_one_reply_run_at_once_and_each_is_kept(client, tmp_path):
    """Three calls in one reply, each sleeping: all three are running at one moment
    (each ran once, under its own call id), and each result is in the transcript."""
    naps = tmp_path / "naps"
    task = f'Nap. [sim:parallel 3] [sim:call nap {{"seconds": 1.5, "path": "{naps}"}}]'
    output, result = answer(client, task)
    assert output == "slept 1.5s" and result.usage.tool_calls == 3
    ran = [line.split() for line in naps.read_text().splitlines()]
    assert len({call_id for call_id, _, _ in ran}) == 3
    assert max(float(start) for _, start, _ in ran) < min(float(end) for _, _, end in ran)
    tools = [e for e in client.job(result.job_id).transcript("root").events if e.kind == "tool"]
    assert [e.tool for e in tools] == ["nap"] * 3 and len({e.call_id for e in tools}) == 3
