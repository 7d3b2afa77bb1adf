"""Tools against a real Redis workspace."""

import uuid

import pytest

from covey import keys
from covey.budgets.budget import Budget
from covey.context import RunContext
from covey.models.replies import ToolCall
from covey.store.workspace import Workspace, WorkspaceError, normalise
from covey.tools.calculator import calculate
from covey.worker.tools import run_tool


@pytest.fixture
def job(redis_client):
    job_id = f"t-{uuid.uuid4().hex}"
    root = RunContext(job_id=job_id, agent_id="root", budget=Budget(max_depth=2))
    child = root.child("root-sub-aa", Budget(max_depth=1), allow=None)
    return root, child, Workspace(redis_client, job_id, keys.DEFAULT_JOB_TTL_SECONDS)


def call(name, **args):
    import json

    return ToolCall(id="c", name=name, arguments=json.dumps(args))


@pytest.mark.parametrize("expr, value", [("2+3*4", "14"), ("7/2", "3.5"), ("(1+2)**3", "27"), ("-4//3", "-2")])
def test_calculator(expr, value):
    assert calculate(expr) == value


@pytest.mark.parametrize(
    "expr",
    ["__import__('os')", "a+1", "9**9**9", "1/0", "((10**1000)**1000)**100", "2**5000", "1" + "+1" * 400],
)
def test_calculator_refuses_anything_but_arithmetic(expr, job):
    root, _, ws = job
    assert run_tool(call("calculator", expression=expr), root, ws).startswith("error:")


def test_child_writes_land_in_its_subroot_and_anyone_reads_them(job):
    root, child, ws = job
    assert (
        run_tool(call("write_file", path="notes.md", content="hi"), child, ws)
        == "wrote .sub_agents/root-sub-aa/notes.md"
    )
    assert run_tool(call("read_file", path=".sub_agents/root-sub-aa/notes.md"), root, ws) == "hi"


@pytest.mark.parametrize("path", ["../x", "../../etc/passwd", "/abs", "a/../../x", "..", "."])
def test_escaping_paths_are_refused(job, path):
    root, child, ws = job
    text = run_tool(call("write_file", path=path, content="x"), child, ws)
    assert text.startswith("error:")
    assert ws.files() == []


def test_a_child_cannot_write_into_a_sibling_or_the_root(job):
    _, child, ws = job
    assert run_tool(call("write_file", path="../root-sub-bb/x", content="x"), child, ws).startswith("error:")
    assert ws.files() == []


def test_missing_file_and_argument_are_tool_errors(job):
    root, _, ws = job
    assert "no file" in run_tool(call("read_file", path="nope.txt"), root, ws)
    assert run_tool(call("read_file"), root, ws) == "error: tool 'read_file': 'path' is a required property"


@pytest.mark.parametrize(
    "arguments, said",
    [
        ('["notes.md", "hi"]', "arguments must be a JSON object, not list"),
        ('"notes.md"', "arguments must be a JSON object, not str"),
        ("null", "arguments must be a JSON object, not NoneType"),
        ('{"path": "notes.md"}', "'content' is a required property"),
        ('{"path": 7, "content": "hi"}', "argument path: 7 is not of type 'string'"),
        ('{"path": "notes.md", "content": ["h", "i"]}', "argument content: ['h', 'i'] is not of type 'string'"),
        (
            '{"path": "notes.md", "content": "hi", "mode": "a"}',
            "Additional properties are not allowed ('mode' was unexpected)",
        ),
        (
            '{"path": "notes.md", "content": "hi',
            "arguments are not JSON: Unterminated string starting at: line 1 column 33 (char 32)",
        ),
    ],
    ids=["list", "string", "null", "missing-field", "wrong-type", "wrong-type-nested", "extra-field", "not-json"],
)
def test_arguments_off_the_schema_are_the_tools_error_and_nothing_runs(job, arguments, said):
    root, _, ws = job
    assert (
        run_tool(ToolCall(id="c", name="write_file", arguments=arguments), root, ws)
        == f"error: tool 'write_file': {said}"
    )
    assert ws.files() == []


def test_normalise_keeps_paths_inside_the_root():
    assert normalise("a/./b/../c.txt") == "a/c.txt"
    assert normalise("x", ".sub_agents/k") == ".sub_agents/k/x"
    with pytest.raises(WorkspaceError):
        normalise("../k2/x", ".sub_agents/k")


def test_list_files_lists_the_workspace_under_a_prefix(job):
    root, child, ws = job
    run_tool(call("write_file", path="a.md", content="1"), root, ws)
    run_tool(call("write_file", path="b.md", content="2"), child, ws)
    assert run_tool(call("list_files", prefix=""), root, ws) == ".sub_agents/root-sub-aa/b.md\na.md"
    assert run_tool(call("list_files", prefix=".sub_agents/"), child, ws) == ".sub_agents/root-sub-aa/b.md"
    assert run_tool(call("list_files", prefix="nothing/"), root, ws) == "no files"


def test_edit_file_replaces_one_occurrence_in_the_agents_own_file(job):
    root, child, ws = job
    run_tool(call("write_file", path="plan.md", content="step one; step two"), child, ws)
    edited = run_tool(call("edit_file", path="plan.md", old="two", new="2"), child, ws)
    assert edited == "edited .sub_agents/root-sub-aa/plan.md"
    assert ws.read(".sub_agents/root-sub-aa/plan.md") == "step one; step 2"
    said = run_tool(call("edit_file", path="plan.md", old="step", new="s"), child, ws)
    assert said == "error: ValueError: old occurs 2 times in plan.md: it must occur exactly once"
    assert run_tool(call("edit_file", path="../x", old="a", new="b"), child, ws).startswith("error: WorkspaceError:")
    assert ws.read(".sub_agents/root-sub-aa/plan.md") == "step one; step 2"


def test_a_control_tool_or_one_not_served_does_not_run_in_the_worker(job):
    root, _, ws = job
    assert run_tool(call("finish", answer="x"), root, ws) == "error: tool 'finish' does not run in the worker"
    assert run_tool(call("lookup_tides"), root, ws) == "error: tool 'lookup_tides' does not run in the worker"


def test_a_write_waits_for_the_workspaces_writer_whoever_it_is(job, redis_client):
    import threading

    root, child, ws = job
    held = redis_client.lock(keys.workspace_writer(root.job_id), timeout=60)
    assert held.acquire(blocking=False)
    done: list[str] = []
    writer = threading.Thread(
        target=lambda: done.append(run_tool(call("write_file", path="a.md", content="x"), child, ws))
    )
    writer.start()
    writer.join(0.5)
    assert writer.is_alive() and ws.files() == []  # nothing written while another writer holds the workspace
    held.release()
    writer.join(30)
    assert done == ["wrote .sub_agents/root-sub-aa/a.md"]
    assert redis_client.exists(keys.workspace_writer(root.job_id)) == 0  # and let go after it


def test_a_write_that_cannot_become_the_writer_before_its_deadline_says_so(job, redis_client):
    root, child, ws = job
    run_tool(call("write_file", path="a.md", content="x"), child, ws)
    held = redis_client.lock(keys.workspace_writer(root.job_id), timeout=60)
    assert held.acquire(blocking=False)
    try:
        text = run_tool(call("edit_file", path="a.md", old="x", new="y"), child, ws, seconds_left=0.2)
        read = run_tool(call("read_file", path=".sub_agents/root-sub-aa/a.md"), root, ws)
    finally:
        held.release()
    assert text.startswith("error: WorkspaceError: another agent is writing the workspace; waited 0.2s")
    assert read == "x"  # unedited, and a read never waits for the writer
