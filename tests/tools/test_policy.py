"""A tool call's timeout and output cap, whatever the tool does."""

from __future__ import annotations

import threading

import pytest

from covey.tools.policy import ToolTimeout, capped, run
from covey.tools.tool import Tool, ToolContext

CTX = ToolContext(job_id="j", agent_id="root", call_id="c", workspace=None)  # type: ignore[arg-type]


def a_tool(fn, **kw) -> Tool:
    return Tool(name="t", origin="test", description="", parameters={"type": "object"}, run=fn, **kw)


def test_a_sync_tool_stuck_past_its_timeout_is_left_behind():
    release = threading.Event()
    with pytest.raises(ToolTimeout, match="tool 't' did not return within its timeout of 0.05s"):
        run(a_tool(lambda args, ctx: release.wait(60) and "late", timeout=0.05), {}, CTX)
    release.set()


def test_what_the_tool_raises_is_raised_to_the_caller_and_an_exit_is_not():
    def boom(args, ctx):
        raise KeyError("k")

    with pytest.raises(KeyError):
        run(a_tool(boom), {}, CTX)

    def leave(args, ctx):
        raise SystemExit(3)

    with pytest.raises(RuntimeError, match="the tool raised SystemExit: 3"):
        run(a_tool(leave), {}, CTX)


def test_output_past_the_cap_is_cut_on_a_character_with_a_note():
    text = run(a_tool(lambda args, ctx: "é" * 10, max_output=5), {}, CTX)
    assert text == "éé\n[output cut: 15 of 20 bytes not shown (max_output=5)]"
    assert capped("short", 5) == "short"
    preview = capped("é" * 10, 5, "a transcript keeps the first {} bytes")
    assert preview == "éé\n[output cut: 15 of 20 bytes not shown (a transcript keeps the first 5 bytes)]"


def test_a_result_that_is_not_text_is_an_error():
    with pytest.raises(TypeError, match="returned int, not text, an Image or a File"):
        run(a_tool(lambda args, ctx: 3), {}, CTX)


def test_a_deadline_nearer_than_the_timeout_cuts_the_call_first():
    release = threading.Event()
    with pytest.raises(ToolTimeout, match="tool 't' did not return in the 0.05s left before a deadline"):
        run(a_tool(lambda args, ctx: release.wait(60) and "late", timeout=30), {}, CTX, seconds_left=0.05)
    release.set()
