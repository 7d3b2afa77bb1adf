"""What a model call of an Agents SDK agent costs on covey, against the plain SDK in one process.

Run from the repo root: ``python bench/sdk_agents.py [--calls N] [--json PATH]``.

One agent (``examples/agents``: the triage agent's ``lookup_order`` tool) asked
to look an order up: two model calls and a tool call per run, against the
in-process ``sim`` (an httpx transport, no network), in one thread, rows
interleaved round by round:

- the plain SDK: ``Runner.run`` with its ``OpenAIChatCompletionsModel`` over the
  sim, the tool run by the SDK;
- the same agent under covey's ``agent`` strategy, through the worker's loop as
  a step runs it (no Celery): each call reserved and settled on a private Redis
  ledger, transcribed, the tool through covey's policy and recorded, the SDK's run
  replayed from its journal at each step;
- covey's own ``react`` strategy making the same calls through the same loop:
  what covey costs without the SDK, so the difference is the SDK and its replay.

Microseconds per model call, medians of interleaved rounds after a warm-up.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "agents"))

import agents
import httpx2
from agents import Agent, Runner
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from bench.harness import calls_main, interleaved, interruptible, private_redis, times_table
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.config.settings import Settings
from covey.context import RunContext
from covey.models import sim
from covey.models.llm import SIM_BASE_URL
from covey.spec import AgentSpec
from covey.worker import loop
from covey.worker.deps import Deps

RUNS = 50  # runs per row and round, two model calls each
ROUNDS = 5
TASK = '[sim:call lookup_order {"order_id": "A1"}]'
COMMAND = "python bench/sdk_agents.py"
ROWS = {
    "sdk": "the plain SDK's `Runner.run`, its tool run by the SDK",
    "agent": "the same agent on covey's loop: ledger, transcript, tool policy, replay",
    "react": "covey's `react` strategy, the same calls on the same loop",
}
ANSWER = "shipped on Monday"


def cases(deps: Deps) -> dict[str, Callable[[], str]]:
    from covey_example_agents.triage import lookup_order

    plain = Agent(name="plain", instructions="Look orders up with lookup_order.", tools=[lookup_order])
    transport = httpx2.AsyncClient(transport=sim.transport())
    client = AsyncOpenAI(api_key="sim", base_url=SIM_BASE_URL, http_client=transport)
    model = OpenAIChatCompletionsModel("sim", openai_client=client)
    agents.set_tracing_disabled(True)
    sdk_loop = asyncio.new_event_loop()

    def by_sdk() -> str:
        config = agents.RunConfig(model=model)
        return sdk_loop.run_until_complete(Runner.run(plain, TASK, run_config=config)).final_output

    made = {
        "sdk": by_sdk,
        "agent": on_loop(deps, AgentSpec(task=TASK, agent="covey_example_agents.triage:triage")),
        "react": _react(deps),
    }
    answers = {key: once() for key, once in made.items()}
    if set(answers.values()) != {ANSWER}:
        raise RuntimeError(f"the runs answered {answers}, not {ANSWER!r}")
    return made


def _react(deps: Deps) -> Callable[[], str]:
    """react making the same two calls: lookup_order served from covey's registry."""
    from covey.tools import registry
    from covey.tools.tool import Tool

    if "lookup_order" not in registry.names():
        said = "The status of an order, by its id."
        registry.add([Tool("lookup_order", "bench", said, _SCHEMA, lambda args, ctx: ANSWER)])
    return on_loop(deps, AgentSpec(task=TASK, tools=["lookup_order"]))


def on_loop(deps: Deps, spec: AgentSpec) -> Callable[[], str]:
    """A run of ``spec`` as a job's one step runs it (no Celery), on the private ledger."""

    def once() -> str:
        ctx = RunContext(job_id=f"bench-{uuid.uuid4().hex}", agent_id="root", budget=Budget(max_tokens=100_000))
        terms = AgentTerms(tools=spec.tools, max_cycles=spec.max_cycles)
        deps.ledger.open_root(ctx.job_id, "root", ctx.budget, terms)
        state, action = loop.begin(deps, ctx, spec)
        finished = loop.advance(deps, state, action)
        assert isinstance(finished, loop.Finished), finished
        return finished.result.output or finished.result.error or ""

    return once


_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


def run_all(runs: int) -> dict:
    with ExitStack() as stack:
        server, _ = private_redis(stack)
        deps = Deps.from_settings(Settings(redis_url=server.url, model="sim", model_retries=0))
        medians = interleaved(cases(deps), runs, ROUNDS, calls_a_run=2)  # two model calls a run
    figures: dict = {"runs": runs, "rounds": ROUNDS, "cores": os.cpu_count(), "python": platform.python_version()}
    figures.update({f"{key}_us": round(us, 1) for key, us in medians.items()})
    figures["openai_agents"] = agents.__version__
    return figures


def table(after: dict, before: dict | None) -> str:
    return times_table(after, before, ROWS, "| a model call of | µs | × the plain SDK's |", 0)


def section(after: dict, before: dict | None) -> str:
    """This benchmark's section of BENCHMARKS.md; with ``before``, an older commit's figures beside."""
    return f"""## An Agents SDK agent's model call on covey (`bench/sdk_agents.py`)

What one model call of an OpenAI Agents SDK agent (openai-agents
{after["openai_agents"]}) costs on covey against the plain SDK in one process:
an agent that looks an order up with a function tool, two model calls and a tool
call a run, against the in-process `sim` (no network), one thread,
{after["runs"]} runs per row and round, medians of {after["rounds"]} interleaved
rounds after a warm-up ({after["cores"]} cores, Python {after["python"]};
microseconds depend on the machine). covey's rows run the worker's loop as a step
runs it, without Celery, on a private Redis: each call reserved and settled on
the ledger, transcribed and published, the tool through covey's policy and
recorded; the `agent` row also replays the SDK's run from its journal at every
step (the run's calls so far answered from it). The `react` row makes the same
calls with covey's own strategy, so `agent` less `react` is what the SDK and its
replay add. From the repo root: `{COMMAND}`.

{table(after, before)}
"""


if __name__ == "__main__":
    interruptible(lambda: calls_main(__doc__, RUNS, run_all, table))
