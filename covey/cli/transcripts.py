"""``covey transcript``: what each agent of a job sent, got back and ran, call by call.

On a terminal the lines are styled (rich); piped, they are the same lines plain.
``--json`` prints the transcripts as the client returns them.
"""

from __future__ import annotations

import json
import sys

import click

from covey.cli.app import cli
from covey.parts import readable
from covey.store.transcripts import ModelCallEvent, ToolCallEvent, Transcript
from covey.store.tree import Node

Line = tuple[str, str]  # a rich style ('' for none) and the text


@cli.command()
@click.argument("job_id")
@click.argument("agent", required=False)
@click.option("--json", "as_json", is_flag=True, help="print the transcripts as JSON")
def transcript(job_id: str, agent: str | None, as_json: bool) -> None:
    """Print what AGENT of JOB_ID (default: every agent, root first) sent to its model,
    what came back and the tools it ran, while the job's records last."""
    from covey.cli.jobs import _known

    handle = _known(job_id)
    nodes = handle.tree()
    if agent is not None:
        nodes = [n for n in nodes if n.agent_id == agent]
        if not nodes:
            raise click.ClickException(f"job {job_id} has no agent {agent}: `covey tree {job_id}` lists its agents")
    found = [(n, handle.transcript(n.agent_id)) for n in nodes]
    if as_json:
        kept = [t.model_dump(mode="json") for _, t in found if t is not None]
        click.echo(json.dumps(kept[0] if agent is not None and kept else {"job_id": job_id, "transcripts": kept}))
        if agent is not None and not kept:
            sys.exit(1)
        return
    show(lines_of(found))
    if agent is not None and found[0][1] is None:
        sys.exit(1)


NO_TRANSCRIPT = "no transcript (no model call yet, COVEY_TRANSCRIPTS=off on its worker, or its records expired)"


def lines_of(found: list[tuple[Node, Transcript | None]]) -> list[Line]:
    """Each agent's heading and its transcript, agents apart by a blank line."""
    lines: list[Line] = []
    for node, kept in found:
        if lines:
            lines.append(("", ""))
        u = node.usage
        lines.append(("bold", f"agent {node.agent_id} · {node.role} · {node.status.value} · {u.total_tokens} tokens"))
        if node.error:
            lines.append(("red", f"  error: {node.error}"))
        lines += events(kept) if kept is not None else [("dim", f"  {NO_TRANSCRIPT}")]
    return lines


def events(t: Transcript) -> list[Line]:
    lines: list[Line] = []
    for event in t.events:
        lines += _model_call(event) if isinstance(event, ModelCallEvent) else _tool_call(event)
    if t.cut is not None:
        lines.append(
            (
                "yellow",
                f"[transcript cut from {t.cut.at} on: {t.cut.entries} more entries, {t.cut.bytes} bytes, "
                "past COVEY_TRANSCRIPT_BYTES]",
            )
        )
    return lines


def _model_call(e: ModelCallEvent) -> list[Line]:
    lines: list[Line] = [("", f"  → {_message(m)}") for m in e.sent]
    facts = [e.model if e.answered_by is None else f"{e.model}, answered by its fallback {e.answered_by}"]
    if e.cached:
        facts.append("from the reply cache")
    if e.usage is not None:
        facts.append(f"{e.usage.prompt_tokens} prompt + {e.usage.completion_tokens} completion tokens")
    if e.finish_reason:
        facts.append(f"finish {e.finish_reason}")
    if e.latency_ms is not None:
        facts.append(f"{e.latency_ms:g} ms")
    if e.at is not None:
        facts.append(e.at.strftime("%H:%M:%S"))
    params = {k: v for k, v in e.params.items() if k != "model"}
    if params:
        facts.append(" ".join(f"{k}={v}" for k, v in params.items()))
    lines.insert(0, ("cyan", f"── call {e.cycle} · " + " · ".join(facts)))
    if e.error is not None:
        lines.append(("red", f"  ← error: {e.error}"))
    if e.reply is not None:
        lines.append(("green", f"  ← {_message({'role': 'assistant', **e.reply})}"))
    return lines


def _tool_call(e: ToolCallEvent) -> list[Line]:
    took = f" · {e.latency_ms:g} ms" if e.latency_ms is not None else " · replayed"
    return [
        ("magenta", f"── tool {e.tool} ({e.call_id}){took}{' · error' if e.error else ''}"),
        ("", f"  arguments {e.arguments}"),
        ("red" if e.error else "", f"  result    {_indented(e.result)}"),
    ]


def _message(m: dict) -> str:
    """One message on its line: its role, its text, and any tool calls it makes."""
    parts = []
    if m.get("content"):
        parts.append(_indented(readable(m["content"])))
    for call in m.get("tool_calls") or []:
        fn = call.get("function", call)  # as sent (OpenAI's nesting) or as received
        parts.append(f"{fn.get('name')}({fn.get('arguments')})")
    role = m.get("role", "?") + (f"[{m['tool_call_id']}]" if m.get("tool_call_id") else "")
    return f"{role:<10} " + " ".join(parts)


def _indented(text: str) -> str:
    return text.replace("\n", "\n             ")


def show(lines: list[Line]) -> None:
    """Styled on a terminal, plain when piped."""
    if not sys.stdout.isatty():
        click.echo("\n".join(text for _, text in lines))
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    for style, text in lines:
        console.print(Text(text, style=style))
