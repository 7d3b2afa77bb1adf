"""The raw Celery baseline: covey's tree shape as plain Celery tasks, and nothing else.

A node of depth D > 0 replaces itself with ``chord(group(W nodes of depth D-1),
join)``, exactly the canvas covey's agents use to fan out; a leaf returns 1 and
``join`` sums, so the root's result is ``W**D``. There is no ledger, checkpoint,
tree record or model call, so timing this next to covey isolates covey's own
per-agent work from what Celery itself costs. Given ``call_seconds``, a node and
a join each sleep that long, as covey's agents wait on their model: a leaf's one
call, and a spawning agent's two (the call that spawns, the call that finishes);
with ``sdk``, each makes that call instead, through the ``openai`` SDK on the
in-process sim answering in ``call_seconds``, as covey's agents do.

The app takes covey's Celery configuration (JSON, late acks, prefetch 1, task
events, ...) with its own queue: the two differ only in what the tasks do.
The worker runs it as ``worker_argv`` says, with ``COVEY_REDIS_URL`` and
``COVEY_QUEUE`` in its environment. ``python -m bench.raw_tree N SECONDS`` is a
sweep's raw baseline: one group of N leaves, each sleeping SECONDS, sent at once
and joined, every result held; it prints their sum. ``python -m bench.raw_tree
--sdk N MS`` is the same group whose tasks ask the sweep's N questions through
the ``openai`` SDK (the in-process sim, answering in MS), as a script would
without covey; it prints how many answers were right.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from typing import TYPE_CHECKING

from celery import Celery, chord, group

from covey.config.celery import celery_config
from covey.config.settings import Settings

if TYPE_CHECKING:
    import openai

NODE, ASK = "raw.node", "raw.ask"


def worker_argv(queue: str, hostname: str, *options: str) -> list[str]:
    """The command line of a Celery worker of this app reading ``queue``."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "bench.raw_tree",
        "worker",
        *options,
        "--queues",
        queue,
        "--hostname",
        hostname,
    ]


def create_app(settings: Settings) -> Celery:
    app = Celery("raw_tree")
    app.conf.update(celery_config(settings))

    @app.task(bind=True, name=NODE)
    def node(self, width: int, depth: int, call_seconds: float = 0, sdk: bool = False) -> int:
        _call(call_seconds, sdk)  # a leaf's answer, or the call that spawns
        if depth == 0:
            return 1
        children = group(node.s(width, depth - 1, call_seconds, sdk) for _ in range(width))
        return self.replace(chord(children, join.s(call_seconds, sdk)))

    @app.task(name="raw.join")
    def join(results: list[int], call_seconds: float = 0, sdk: bool = False) -> int:
        _call(call_seconds, sdk)  # the call that finishes
        return sum(results)

    @app.task(name=ASK)
    def ask(question: str) -> str | None:
        """One chat completion through the SDK: its answer."""
        reply = _llm().chat.completions.create(
            model="sim", messages=[{"role": "user", "content": question}], max_completion_tokens=1000
        )
        return reply.choices[0].message.content

    return app


def _call(seconds: float, sdk: bool) -> None:
    """A model call of ``seconds``: slept through, or (``sdk``) made."""
    if sdk:
        _llm().chat.completions.create(
            model="sim", messages=[{"role": "user", "content": f"[sim:latency {round(seconds * 1000)}] go"}]
        )
    elif seconds:
        time.sleep(seconds)


@functools.cache
def _llm() -> openai.OpenAI:
    """One SDK client per worker process, shared by its threads, on the in-process sim.
    Imported here: the sleeping baselines' worker and submitters never load the SDK."""
    import httpx2
    import openai

    from covey.models import sim
    from covey.models.llm import SIM_BASE_URL

    return openai.OpenAI(api_key="sim", base_url=SIM_BASE_URL, http_client=httpx2.Client(transport=sim.transport()))


app = create_app(Settings())  # configured from COVEY_* variables, for the worker


def submit_group(n: int, call_seconds: float) -> int:
    """N leaves as one group, joined: what a script without covey does with N samples."""
    node = app.signature(NODE)
    return sum(group(node.clone(args=(1, 0, call_seconds)) for _ in range(n)).apply_async().get(timeout=3600))


def question(i: int, latency_ms: int) -> tuple[str, int]:
    """The sweep's sample ``i`` (``bench/sweep.py``): its question and its answer."""
    slow = f"[sim:latency {latency_ms}] " if latency_ms else ""
    return f"{slow}What is {i} + {i % 7}?", i + i % 7


def submit_asks(n: int, latency_ms: int) -> int:
    """N questions as one group of SDK calls, joined and scored: how many were right."""
    asked = [question(i, latency_ms) for i in range(n)]
    ask = app.signature(ASK)
    answers = group(ask.clone(args=(q,)) for q, _ in asked).apply_async().get(timeout=3600)
    return sum(answer is not None and answer.strip() == str(target) for answer, (_, target) in zip(answers, asked))


if __name__ == "__main__":
    if sys.argv[1] == "--sdk":
        print(json.dumps({"right": submit_asks(int(sys.argv[2]), int(sys.argv[3]))}))
    else:
        print(json.dumps({"sum": submit_group(int(sys.argv[1]), float(sys.argv[2]))}))
