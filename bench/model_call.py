"""What one model call costs a worker's CPU: covey's ``LLM.call`` against the SDK's own ``create()``.

Run from the repo root: ``python bench/model_call.py [--calls N] [--json PATH]``.

Against a fast endpoint (a local vLLM, a cache) a worker's CPU per call is what
sets a sweep's pace, and covey reaches every model through the official
``openai`` SDK. Each row makes the same one-turn chat completion against the
in-process ``sim`` (an ``httpx2.MockTransport``, no network), in one thread:

- the sim's handler alone, given the request: the model's own share;
- the SDK as its README shows it, ``client.chat.completions.create(...)`` with
  typed parameters, its reply parsed into a ``ChatCompletion``;
- covey's ``LLM.call``, as a worker's step calls it (its catalog lookup, its
  parameters, the call, its usage and reply checked);
- the same call of the sim named in a models file, its reply read whole
  (``stream = false``) and read as a stream (the default, which cuts a reply at
  its reservation: ``covey.models.stream``), so the two differ by streaming alone.

Medians of interleaved rounds after a warm-up, so a slow spell of this shared
machine hits every row alike. Nothing else is started: the sim runs in this process.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/model_call.py` puts bench/, not the root, on the path

import httpx2
import openai

from bench.harness import calls_main, interleaved, interruptible, times_table
from covey.config.settings import Settings
from covey.models import sim
from covey.models.catalog import Catalog, ModelEntry
from covey.models.llm import LLM, SIM_BASE_URL

CALLS = 1000  # per row and round
ROUNDS = 5
MAX_TOKENS = 500
MESSAGES = [
    {"role": "system", "content": "Answer with the number alone."},
    {"role": "user", "content": "What is 3 + 4?"},
]
COMMAND = "python bench/model_call.py"
ROWS = {
    "sim": "the sim's handler alone (the model's own work)",
    "sdk": "the SDK's `chat.completions.create`, typed, its reply parsed",
    "covey": "covey's `LLM.call`, as a worker's step makes it",
    "whole": "`LLM.call` of a models-file entry, `stream = false`",
    "streamed": "`LLM.call` of a models-file entry, streamed (the default)",
}


def cases() -> dict[str, Callable[[], object]]:
    settings = Settings(model="sim")
    llm = LLM(settings)
    sdk = openai.OpenAI(
        api_key="sim",
        base_url=SIM_BASE_URL,
        http_client=httpx2.Client(transport=sim.transport()),
        max_retries=settings.model_retries,
        timeout=settings.model_timeout,
    )
    handler = sim.make_handler()
    body = {"model": "sim", "messages": MESSAGES, "max_completion_tokens": MAX_TOKENS}
    request = httpx2.Request("POST", f"{SIM_BASE_URL}/chat/completions", json=body)

    def by_sdk() -> str | None:
        completion = sdk.chat.completions.create(model="sim", messages=MESSAGES, max_completion_tokens=MAX_TOKENS)
        return completion.choices[0].message.content

    def by_covey() -> str | None:
        return llm.call("sim", MESSAGES, [], MAX_TOKENS)[0].content

    named = {
        name: LLM(settings, Catalog({name: entry}, settings, {"K": "k"}), transport=sim.transport())
        for name in ("whole", "streamed")
        for entry in [ModelEntry(base_url=SIM_BASE_URL, api_key_env="K", model="sim", stream=name == "streamed")]
    }

    def by_entry(name: str) -> Callable[[], str | None]:
        return lambda: named[name].call(name, MESSAGES, [], MAX_TOKENS)[0].content

    made = {"sim": lambda: handler(request), "sdk": by_sdk, "covey": by_covey, **{n: by_entry(n) for n in named}}
    answers = {handler(request).json()["choices"][0]["message"]["content"]}
    answers |= {once() for key, once in made.items() if key != "sim"}  # type: ignore[misc]
    if answers != {"7"}:
        raise RuntimeError(f"the calls answered {answers}, not 7")
    return made


def run_all(calls: int) -> dict:
    medians = interleaved(cases(), calls, ROUNDS)
    figures: dict = {"calls": calls, "rounds": ROUNDS, "cores": os.cpu_count(), "python": platform.python_version()}
    figures.update({f"{key}_us": round(us, 1) for key, us in medians.items()})
    figures["openai"] = openai.__version__
    return figures


def table(after: dict, before: dict | None) -> str:
    """Microseconds per call and the multiple of the SDK's own; with ``before``, its figure beside."""
    return times_table(after, before, ROWS, "| call | µs per call | × the SDK's `create` |", 1)


def section(after: dict, before: dict | None) -> str:
    """The model call's section of BENCHMARKS.md; with ``before`` (the same JSON from an older commit), beside it."""
    return f"""## One model call (`bench/model_call.py`)

What one chat completion costs a worker's CPU, against a model that costs
nothing: the in-process `sim` (an httpx transport, no network), one thread,
{after["calls"]:,} calls per row and round, medians of {after["rounds"]} interleaved
rounds after a warm-up ({after["cores"]} cores, Python {after["python"]}, openai
{after["openai"]}; microseconds depend on the machine). Against a local or cached
endpoint this CPU, not the model, sets a sweep's pace. The SDK's row is the
call as its README makes it; covey's is `LLM.call` as a worker's step makes it,
through the same SDK client (its headers, auth, retries and errors), posting a
plain JSON body and reading the reply's JSON, each field checked. The last two
rows call the same sim named in a models file, read whole and read as a stream
(the default for every endpoint but the in-process sim, so covey can cut a reply
at its reservation): what streaming costs a call, the sim's writing of its events
included. From the repo root: `{COMMAND}`.

{table(after, before)}
"""


if __name__ == "__main__":
    interruptible(lambda: calls_main(__doc__, CALLS, run_all, table))
