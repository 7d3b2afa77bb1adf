"""What the default tool surface saves: tokens of a job naming no tools against one
naming every tool (``*``), on a worker serving twenty tools of its own.

Run from the repo root: ``python bench/tool_surface.py [--json PATH]``.

One ``covey worker --pool threads`` process serves covey's built-ins and the twenty
of ``bench/surface_tools.py`` (``COVEY_TOOLS``). Each strategy's run of
docs/strategies.md (``What is 17 * 3?``) goes once as a job naming no tools (offered
the built-ins) and once with ``tools = ["*"]`` (every served tool: what every job
was offered before). The sim is deterministic, so one run of each is its figure:
the tokens the ledger charged the tree, and the prompt of the root's first call.
A private redis-server and the worker are started here and stopped on exit.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/tool_surface.py` puts bench/, not the root, on the path

from bench.harness import interruptible, report, sim_worker
from covey.client import Client

TASK = "What is 17 * 3?"
STRATEGIES = ("react", "lats")
SURFACES = {"default": None, "every served tool": ["*"]}


def _run(client: Client, strategy: str, tools: list[str] | None) -> dict:
    handle = client.submit(client.spec(TASK, strategy=strategy, tools=tools))
    result = handle.result(timeout=300)
    assert result.ok, result.error
    first = next(e for e in handle.transcript().events if e.kind == "model")
    return {
        "tokens": result.usage.total_tokens,
        "first_prompt": first.usage.prompt_tokens,
        "offered_first": len(first.tools),
        "agents": result.usage.agents + 1,
        "output": result.output,
    }


def measure(logs: Path) -> dict:
    with ExitStack() as stack:
        client = sim_worker(
            stack, "surface@bench", logs, slots=4, latency_ms=0, env={"COVEY_TOOLS": "bench.surface_tools"}
        )
        served = len({t.name for entry in client.catalog.entries() for t in entry.tools})
        runs = [
            {"strategy": strategy, "surface": surface, **_run(client, strategy, tools)}
            for strategy in STRATEGIES
            for surface, tools in SURFACES.items()
        ]
    return {"served": served, "task": TASK, "runs": runs}


def section(after: dict, before: dict | None) -> str:
    """``before`` is not shown: the ``*`` rows are what every job was offered before."""
    rows = []
    for strategy in STRATEGIES:
        default, every = (
            next(r for r in after["runs"] if (r["strategy"], r["surface"]) == (strategy, s)) for s in SURFACES
        )
        for run in (default, every):
            rows.append(
                f"| `{strategy}` | {run['surface']} | {run['offered_first']} | {run['first_prompt']:,} "
                f"| {run['agents']} | {run['tokens']:,} |"
            )
        saved = 1 - default["tokens"] / every["tokens"]
        rows.append(f"| `{strategy}` | saved by the default | | | | {saved:.0%} |")
    return f"""## The tools a job is offered by default (`bench/tool_surface.py`)

One worker serves {after["served"]} tools: covey's built-ins and twenty of its own
(`bench/surface_tools.py`, an inventory service's, two described arguments each).
Each strategy's run of docs/strategies.md (`{after["task"]}`) goes as a job naming no
tools, offered the built-ins alone (the default), and as one naming `*`, offered every
served tool (what every job was offered before). The sim is deterministic: one run
each. Columns: tools offered at the root's first call, that call's prompt tokens,
agents in the tree, tokens the ledger charged the tree.

```
python bench/tool_surface.py
```

| strategy | tools | offered at first | first prompt | agents | tokens |
|---|---|---:|---:|---:|---:|
{chr(10).join(rows)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    report(measure, lambda f: section(f, None), args.json)


if __name__ == "__main__":
    interruptible(main)
