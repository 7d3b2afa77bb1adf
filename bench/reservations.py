"""How close what the ledger reserves for a call is to what the call then costs.

Run from the repo root: ``python bench/reservations.py [--json PATH]`` (``bench/all.py
--before REV`` runs it on an older covey too: it uses only what both have).

A react agent answers ``What is 6 * 7?`` after a long English, code or CJK text
(two model calls: the calculator, then the answer), on the sim, through the
worker's own loop and a real Redis ledger. Two models: ``sim``, and the same sim
served as a named endpoint without a tokenizer (``untokenized``), whose first call
can be bounded only by its bytes. Every reserve and settle is recorded: the
prompt's share of a reservation (the least the reserve asks for, less the reply
floor) over the prompt tokens the sim reported, per call; and per job, everything
reserved (prompt and reply, with ``max_call_tokens`` 256) over everything used.
The sim bills four characters a token, about what English costs on a real BPE
(less than code or CJK do), so a ratio here is of the reservation's slack, not of
a real model's.

A private redis-server is started here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/reservations.py` puts bench/, not the root, on the path

from bench.harness import private_redis, report
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.budgets.redis_ledger import RedisLedger
from covey.config.settings import Settings
from covey.context import RunContext
from covey.models import sim
from covey.models.catalog import Catalog
from covey.models.llm import LLM
from covey.spec import AgentSpec
from covey.worker import loop
from covey.worker.deps import Deps

MAX_CALL_TOKENS = 256
REPLY_FLOOR = min(64, MAX_CALL_TOKENS)  # the least reply a reserve asks for, in every covey measured here
TEXTS = {
    "English": (
        "The committee met on Tuesday to review the quarterly figures. Revenue rose in every region, "
        "though costs grew faster in the north, where two new offices opened. "
    )
    * 12,
    "code": ("def total(rows):\n    return sum(r['amount'] for r in rows if r.get('ok'))  # skip failed rows\n") * 18,
    "CJK": "委員會於星期二開會，審查本季度的數字。各地區收入均有增長，但北方的成本增長更快。" * 12,
}
MODELS = ("sim", "untokenized")


class Recorder:
    """The real ledger and LLM, noting each call's prompt reservation, grant and usage."""

    def __init__(self, ledger: RedisLedger, llm: LLM) -> None:
        self.ledger, self.llm, self.catalog = ledger, llm, llm.catalog
        self.calls: list[dict] = []

    # the ledger's and the LLM's other methods the loop uses, passed through
    def __getattr__(self, name):
        part = self.ledger if hasattr(self.ledger, name) else self.llm
        return getattr(part, name)

    def reserve(self, *args, **kwargs):
        grant = self.ledger.reserve(*args, **kwargs)
        self.calls.append({"prompt_reserved": kwargs["min_tokens"] - REPLY_FLOOR, "reserved": grant.tokens})
        return grant

    def call(self, *args, **kwargs):
        reply, usage = self.llm.call(*args, **kwargs)
        self.calls[-1]["prompt_used"] = usage.prompt_tokens
        self.calls[-1]["used"] = usage.total_tokens
        return reply, usage


def measure(url: str, folder: Path) -> dict:
    models = folder / "models.toml"
    models.write_text('[models.untokenized]\nbase_url = "http://sim.covey/v1"\napi_key_env = "K"\nmodel = "sim"\n')
    settings = Settings(redis_url=url, models=models, model_retries=0)
    deps = Deps.from_settings(settings)
    figures: dict = {}
    for kind, text in TEXTS.items():
        for model in MODELS:
            llm = LLM(settings, catalog=Catalog.from_settings(settings, environ={"K": "k"}), transport=sim.transport())
            recorder = Recorder(deps.ledger, llm)  # type: ignore[arg-type]
            deps.ledger, deps.llm = recorder, recorder  # type: ignore[assignment]
            try:
                result = _run(deps, f"{text}\nWhat is 6 * 7?", model)
            finally:
                deps.ledger, deps.llm = recorder.ledger, recorder.llm
            if result.output != "42":
                raise RuntimeError(f"{kind} on {model}: {result.status.value}: {result.error}")
            calls = recorder.calls
            figures[f"{kind}/{model}"] = {
                "calls": [round(c["prompt_reserved"] / c["prompt_used"], 2) for c in calls],
                "job": round(sum(c["reserved"] for c in calls) / sum(c["used"] for c in calls), 2),
                "prompt_tokens": [c["prompt_used"] for c in calls],
            }
    return figures


def _run(deps: Deps, task: str, model: str):
    ctx = RunContext(job_id=f"bench-{uuid.uuid4().hex}", agent_id="root", budget=Budget(), allow=["calculator"])
    spec = AgentSpec(task=task, model=model, tools=["calculator"], max_call_tokens=MAX_CALL_TOKENS)
    deps.ledger.open_root(ctx.job_id, "root", ctx.budget, AgentTerms(max_cycles=spec.max_cycles))
    state, action = loop.begin(deps, ctx, spec)
    return loop.advance(deps, state, action).result


def run_all(folder: Path) -> dict:
    with ExitStack() as stack:
        server, _ = private_redis(stack)
        return measure(server.url, folder)


def section(after: dict, before: dict | None) -> str:
    return f"""## Reservations (`bench/reservations.py`)

What a call reserves against what it then costs (1.00 is exact; the bound is strict,
so never below). A react agent answers a question after about 2,000 characters of
English, code or CJK (two calls: the calculator, then the answer) on the sim, which
counts its own prompts exactly, and on the same sim served without a tokenizer
(`untokenized`), whose first call only its bytes can bound. Per call: the prompt
reserved over the prompt reported. Per job: all reserved (prompt and reply, with
`max_call_tokens` 256) over all used. The sim bills four characters a token, about
what English costs on a real BPE, so the byte bound is about 4× for English and code
and more for CJK (three bytes a character). Before the reservations took the prior
call's reported prompt (commit `e58e947`), every call reserved its whole prompt's bytes.

Command (from the repo root; it starts its own redis-server):

```
python bench/reservations.py
```

{table(after, before)}
"""


def table(after: dict, before: dict | None) -> str:
    lines = [
        "| prompt / model | prompt tokens (call 1, 2) | call 1 before | call 1 after | call 2 before | call 2 after "
        "| job before | job after |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, a in after.items():
        b = (before or {}).get(name)
        first, second = (f"{r:.2f}" for r in b["calls"]) if b else ("—", "—")
        job = f"{b['job']:.2f}" if b else "—"
        tokens = ", ".join(f"{t:,}" for t in a["prompt_tokens"])
        lines.append(
            f"| {name} | {tokens} | {first} | {a['calls'][0]:.2f} | {second} | {a['calls'][1]:.2f} "
            f"| {job} | {a['job']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(run_all, lambda figures: table(figures, None), args.json)


if __name__ == "__main__":
    main()
