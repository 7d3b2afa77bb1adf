"""``covey events``: a job's events in the order they happened, once or followed.

One line per event, or with ``--json`` one JSON object per line (its ``id``
included, the place to resume after). Following ends with the job's last event.
"""

from __future__ import annotations

import click

from covey.cli.app import cli, connect, interrupted
from covey.cli.options import Seconds
from covey.events import EventType, JobEvent
from covey.store.events import EVENT_ID


def _event_id(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not EVENT_ID.match(value):
        raise click.BadParameter(f"{value!r} is not an event id: event ids read like 1765000000000-0")
    return value


@cli.command()
@click.argument("job_id")
@click.option("--follow", "-f", is_flag=True, help="wait for more events until the job's last")
@click.option("--after", metavar="EVENT_ID", callback=_event_id, help="only the events after this one")
@click.option("--timeout", type=Seconds(), default=None, help="with --follow, seconds to wait (default: until done)")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line, with its id")
def events(job_id: str, follow: bool, after: str | None, timeout: float | None, as_json: bool) -> None:
    """Print JOB_ID's events: agents opened, running, waiting and finished, model and
    tool calls, the job's result; with --follow, as they happen."""
    from covey.client.errors import UnknownJob
    from covey.client.events import UnknownEvent

    handle, last = connect().job(job_id), after
    try:
        for event in handle.events(after, follow, timeout):
            click.echo(event.model_dump_json(exclude_none=True) if as_json else line(event))
            last = event.id
    except (UnknownJob, UnknownEvent) as e:
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        resume = f" --after {last}" if last else ""
        interrupted(f"job {job_id} goes on; `covey events {job_id} --follow{resume}` takes up where this left off")


def line(event: JobEvent) -> str:
    """``12:04:05.123  model.finished  root-sub-1a2b3c4d  call 2: 829 + 4 tokens, tool_calls, 102 ms``"""
    at = event.at.astimezone().strftime("%H:%M:%S.%f")[:-3] if event.at else "--:--:--.---"
    said = _said(event)
    return f"{at}  {event.type.value:<18} {event.agent_id}" + (f"  {said}" if said else "")


def _said(e: JobEvent) -> str:
    if e.type is EventType.AGENT_OPENED:
        under = f" under {e.parent_id}" if e.parent_id else ""
        return f"{e.role}, depth {e.depth}{under}: {e.task}"
    if e.type is EventType.AGENT_RUNNING:
        return f"on {e.worker}" if e.worker else ""
    if e.type is EventType.AGENT_WAITING:
        if e.wait is not None:
            return f"for {e.wait.reason}"
        return f"on {len(e.awaiting or [])} children" if e.awaiting else "on its children"
    if e.type in (EventType.AGENT_FINISHED, EventType.JOB_FINISHED):
        what = e.error if e.error else e.output
        tokens = f" ({e.usage.total_tokens} tokens)" if e.usage is not None else ""
        return f"{e.status.value if e.status else '?'}{tokens}: {what or ''}".rstrip(": ")
    if e.type is EventType.MODEL_STARTED:
        return f"call {e.cycle} to {e.model}, {e.reserved} tokens reserved"
    if e.type is EventType.MODEL_DELTA:
        return f"call {e.cycle} +{e.text!r}"
    if e.type is EventType.MODEL_FINISHED:
        took = f", {e.latency_ms:g} ms" if e.latency_ms is not None else ""
        if e.error is not None:
            return f"call {e.cycle} failed{took}: {e.error}"
        u = e.usage
        tokens = f"{u.prompt_tokens} + {u.completion_tokens} tokens" if u is not None else "no usage"
        return f"call {e.cycle}: {tokens}, {e.finish_reason}{took}"
    if e.type is EventType.TOOL_STARTED:
        return f"{e.tool}({e.arguments})"
    if e.type is EventType.TOOL_FINISHED:
        took = f" ({e.latency_ms:g} ms)" if e.latency_ms is not None else ""
        return f"{e.tool} error{took}: {e.error}" if e.error is not None else f"{e.tool}{took}: {e.result}"
    if e.type is EventType.APPROVAL_REQUESTED:
        until = f" until {e.until.astimezone():%Y-%m-%d %H:%M}" if e.until else ""
        return f"{e.tool}({e.arguments}) {e.call_id} waits for a decision{until}"
    if e.type is EventType.APPROVAL_DECIDED:
        return f"{e.tool} {e.call_id} {e.decision}" + (f": {e.reason}" if e.reason else "")
    return ""
