"""Tools a test worker serves through ``COVEY_TOOLS=tests.integration.served_tools``:
one per way a tool can go wrong, one that counts its own runs, one that says
when it ran, and one that waits for a person above an amount; and a guardrail
for each thing a guardrail checks."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from covey import ToolContext, guardrail, tool

HUGE_BYTES = 10 * 1024 * 1024


@tool
def tally(path: str, ctx: ToolContext) -> str:
    """Append this call's id to a file: the tool's own count of its runs.

    Args:
        path: the file to append to
    """
    with Path(path).open("a") as f:
        f.write(f"{ctx.job_id} {ctx.agent_id} {ctx.call_id}\n")
    return f"tallied {ctx.call_id}"


@tool
def nap(seconds: float, path: str, ctx: ToolContext) -> str:
    """Sleep, then append this call's id and when it slept to a file: calls that ran
    at the same time show as overlapping spans.

    Args:
        seconds: how long to sleep
        path: the file to append to
    """
    started = time.time()
    time.sleep(seconds)
    with Path(path).open("a") as f:
        f.write(f"{ctx.call_id} {started} {time.time()}\n")
    return f"slept {seconds}s"


@tool
def explode(reason: str) -> str:
    """Raise, always."""
    raise RuntimeError(f"exploded: {reason} with api_key=sk-secret123456789")


@tool  # the test worker's COVEY_TOOL_TIMEOUTS gives it one second
def hang(seconds: float) -> str:
    """Sleep far past this tool's timeout."""
    time.sleep(seconds)
    return "woke"


@tool(timeout=1.0)
async def hang_async(seconds: float) -> str:
    """Sleep far past this tool's timeout of one second, as a coroutine."""
    await asyncio.sleep(seconds)
    return "woke"


@tool
def huge() -> str:
    """Return ten megabytes of text."""
    return "x" * HUGE_BYTES


@tool
def add(a: int, b: int) -> dict[str, int]:
    """Add two whole numbers."""
    return {"sum": a + b}


@tool
def slumber(seconds: float) -> str:
    """Sleep, under the default timeout of 30 s."""
    time.sleep(seconds)
    return "woke"


@tool(needs_approval=lambda arguments: arguments.get("amount", 0) > 100)
def pay(amount: int, path: str, ctx: ToolContext) -> str:
    """Pay an amount (append it to a file): above 100, a person approves each payment first.

    Args:
        amount: what to pay
        path: the file to append to
    """
    with Path(path).open("a") as f:
        f.write(f"{ctx.call_id} {amount}\n")
    return f"paid {amount}"


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text


@guardrail(on="input")
def no_passwords(text: str) -> str | None:
    """Refuse a task that carries a password."""
    return "the task carries a password" if "password" in text.lower() else None


@guardrail(on="output")
def no_shouting(text: str) -> str | None:
    """Refuse an answer that shouts."""
    return "the answer shouts" if "!!!" in text else None


@guardrail(on="tool_call", tell_model=True)
def small_sums(tool: str, arguments: dict) -> str | None:
    """Tell the model a calculation is too large to run."""
    if tool == "calculator" and len(str(arguments.get("expression", ""))) > 20:
        return "expressions of more than 20 characters are not run"
    return None


@guardrail(on="tool_result")
def no_leaks(tool: str, result: str) -> str | None:
    """Stop an agent whose tool returned a secret."""
    return "a tool returned a secret" if "sk-" in result else None
