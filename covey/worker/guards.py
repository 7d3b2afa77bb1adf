"""The job's guardrails (``covey.tools.guardrails``) run where what they check passes:
the root's task before its first call, an agent's answer before it ends
``completed``, a tool call before it runs and its result before the model reads
it. A tripped one ends the agent ``failed`` with cause ``guardrail``, or, for a
tool guardrail made to tell the model, becomes the call's result."""

from __future__ import annotations

import json
from typing import Any

from covey.models.replies import ToolCall
from covey.status import Cause, CauseKind
from covey.tools import guardrails
from covey.tools.guardrails import Guardrail, Where
from covey.worker.agent_state import AgentState
from covey.worker.calls import Stop

ERROR = "error: guardrail {name} stopped this call: {reason}"


def on_input(state: AgentState) -> Stop | None:
    """Whether the job's task passes its input guardrails (checked by its root)."""
    if state.ctx.depth > 0:
        return None
    return _first(state, "input", "the job's input", state.spec.task)


def on_output(state: AgentState, output: str | None) -> Stop | None:
    return _first(state, "output", "the agent's answer", output or "")


def on_call(state: AgentState, call: ToolCall) -> Stop | str | None:
    """A stop, the text the model reads instead of the call's result, or None to run it."""
    try:
        arguments: Any = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = call.arguments  # as sent: the tool refuses it itself
    return _tool(state, "tool_call", call, arguments)


def on_result(state: AgentState, call: ToolCall, text: str) -> Stop | str | None:
    """A stop, the text the model reads instead of ``text``, or None to hand it on."""
    return _tool(state, "tool_result", call, text)


def _first(state: AgentState, on: Where, what: str, *args: Any) -> Stop | None:
    for guard in guardrails.of(state.spec.guardrails, on):
        reason = guard.tripped(*args)
        if reason is not None:
            return _stop(guard, what, reason)
    return None


def _tool(state: AgentState, on: Where, call: ToolCall, given: Any) -> Stop | str | None:
    for guard in guardrails.of(state.spec.guardrails, on):
        reason = guard.tripped(call.name, given)
        if reason is not None:
            if guard.tell_model:
                return ERROR.format(name=guard.name, reason=reason)
            return _stop(guard, f"a call of {call.name}" if on == "tool_call" else f"the result of {call.name}", reason)
    return None


def _stop(guard: Guardrail, what: str, reason: str) -> Stop:
    return Stop(
        Cause(kind=CauseKind.GUARDRAIL, guardrail=guard.name), f"guardrail {guard.name} stopped {what}: {reason}"
    )
