"""What one tool call costs an agent, against calling the same function directly.

Run from the repo root: ``python bench/tools.py [--calls N] [--json PATH]``.

Each row is a tool the worker serves, called as an agent's step calls it:
``covey.worker.tool_calls.run_tools`` with one call, on a real Redis ledger
(the call counted by its Lua script, its arguments checked against the schema,
the tool run in a thread of its own under its timeout, its output capped, its
result kept for a replay). Beside it, the same call replayed (a redelivered
step: the kept result, no run) and the call without the ledger
(``covey.worker.tools.run_tool``: checking, thread, cap). The baseline is the
function itself, called in this process. Medians of interleaved rounds after a
warm-up, so a slow spell of this shared machine hits every row alike.

A row is one ``Case`` in ``CASES``: the ``Tool`` to serve, built on an
``ExitStack`` that stops whatever it started (a server behind the tool, say).
The function a case calls should be ``lookup_weather``, so that the baseline
is the same work.

A private redis-server is started here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import itertools
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/tools.py` puts bench/, not the root, on the path
sys.path.insert(0, str(ROOT / "examples" / "tools"))  # the example's tool, without installing it

from covey_example_tools.weather import lookup_weather

from bench.harness import calls_main, interruptible, private_redis
from covey.budgets.budget import Budget
from covey.config.settings import Settings
from covey.context import ROOT_AGENT_ID, RunContext
from covey.models.replies import ToolCall
from covey.orchestration import react
from covey.spec import AgentSpec
from covey.tools import registry
from covey.tools.tool import Tool
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps
from covey.worker.tool_calls import run_tools
from covey.worker.tools import run_tool

CALLS = 500  # per row and round
ROUNDS = 5
ARGUMENTS = '{"city": "Paris"}'
COMMAND = "python bench/tools.py"


@dataclass(frozen=True)
class Case:
    key: str  # of its figures in the JSON
    label: str  # what the table calls it
    tool: Callable[[ExitStack], Tool]


CASES: list[Case] = [
    Case("function", "function tool (`@covey.tool`)", lambda stack: lookup_weather),
]


def per_call(calls: int, once: Callable[[int], object]) -> float:
    """Microseconds per call of ``once(i)``, over ``calls`` calls."""
    start = time.perf_counter()
    for i in range(calls):
        once(i)
    return (time.perf_counter() - start) / calls * 1e6


def agent(deps: Deps) -> AgentState:
    """A root agent opened on the ledger, past its first model call, as a step that runs tools is."""
    ctx = RunContext(job_id=str(uuid.uuid4()), agent_id=ROOT_AGENT_ID, budget=Budget())
    spec = AgentSpec(task="bench")
    deps.ledger.open_root(ctx.job_id, ROOT_AGENT_ID, ctx.budget)
    state = react.start(spec, ctx).state
    return AgentState(ctx=ctx, spec=spec, strategy_state=state, started_at=datetime.now(UTC), cycle=1)


def through_covey(deps: Deps, state: AgentState, made: list[ToolCall]) -> dict[str, float]:
    """Microseconds per call of ``made``: as a step runs them, replayed, and without the ledger."""
    workspace = deps.workspace(state.ctx.job_id)
    return {
        "worker": per_call(len(made), lambda i: run_tools(deps, state, [made[i]])),
        "replayed": per_call(len(made), lambda i: run_tools(deps, state, [made[i]])),
        "no_ledger": per_call(len(made), lambda i: run_tool(made[i], state.ctx, workspace)),
    }


def run_all(calls: int) -> dict:
    ids = itertools.count()
    with ExitStack() as stack:
        server, _ = private_redis(stack)
        deps = Deps.from_settings(Settings(redis_url=server.url))
        stack.callback(deps.redis.close)
        tools = {case.key: case.tool(stack) for case in CASES}
        registry.add(tools.values())
        samples: dict[str, list[float]] = {"direct": []}
        for round_ in range(ROUNDS + 1):  # round 0 warms up
            state = agent(deps)
            measured = {"direct": per_call(calls, lambda i: lookup_weather("Paris"))}
            for key, tool in tools.items():
                made = [ToolCall(id=f"call_{next(ids)}", name=tool.name, arguments=ARGUMENTS) for _ in range(calls)]
                measured.update({f"{key}_{how}": us for how, us in through_covey(deps, state, made).items()})
            if state.usage.tool_calls != 2 * calls * len(tools):
                raise RuntimeError(f"{state.usage.tool_calls} tool calls counted, {2 * calls * len(tools)} made")
            if round_:
                for key, value in measured.items():
                    samples.setdefault(key, []).append(value)
            print(f"round {round_}/{ROUNDS}", file=sys.stderr)
    figures: dict = {
        "calls": calls,
        "rounds": ROUNDS,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "cases": {case.key: case.label for case in CASES},
    }
    figures.update({f"{key}_us": round(statistics.median(values), 1) for key, values in samples.items()})
    return figures


def table(after: dict, before: dict | None) -> str:
    """Microseconds per call and the multiple of the direct call; with ``before``, its figure beside."""
    direct = after["direct_us"]
    rows = [("direct_us", "the function, called directly")]
    for key, label in after["cases"].items():
        rows += [
            (f"{key}_worker_us", f"{label}, as an agent's step calls it"),
            (f"{key}_replayed_us", f"{label}, replayed by a redelivered step"),
            (f"{key}_no_ledger_us", f"{label}, without the ledger"),
        ]
    head = "| call | µs per call | overhead (µs) | × direct |"
    lines = [head + (" before (µs) |" if before else ""), "|---|---:|---:|---:|" + ("---:|" if before else "")]
    for key, label in rows:
        line = f"| {label} | {after[key]:,.1f} | {after[key] - direct:,.1f} | {after[key] / direct:,.0f}× |"
        if before is not None:
            line += f" {before[key]:,.1f} |" if key in before else " — |"
        lines.append(line)
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    """The tools' section of BENCHMARKS.md; with ``before`` (the same JSON from an older commit), beside it."""
    return f"""## One tool call (`bench/tools.py`)

What a tool call costs an agent beyond the function's own work: the tool called
as an agent's step calls it (counted on the Redis ledger, its arguments checked
against its schema, run in a thread under its timeout, its output capped, its
result kept so a redelivered step replays it), the same call replayed, and the
call without the ledger, against calling the function directly in one process
({after["calls"]:,} calls per row and round; medians of {after["rounds"]}
interleaved rounds after a warm-up, on {after["cores"]} cores and Python
{after["python"]}; microseconds depend on the machine). The function is
`lookup_weather` of `examples/tools`. A real model call takes hundreds of
milliseconds; a tool call's overhead is the two Redis round trips and a thread.

Command (from the repo root; it starts its own redis-server):

```
{COMMAND}
```

{table(after, before)}
"""


if __name__ == "__main__":
    interruptible(lambda: calls_main(__doc__, CALLS, run_all, table))
