"""Commands that submit jobs and follow them: run, submit, status, result, tree, ledger, cancel."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import click

from covey import inputs
from covey.budgets.budget import MAX_COUNT
from covey.cli import render
from covey.cli.app import cli, connect, interrupted, print_json
from covey.cli.options import Dollars, KeyValue, Seconds, names
from covey.client.progress import waiting
from covey.config.priorities import LEAST_URGENT, MOST_URGENT
from covey.orchestration import registry
from covey.parts import MAX_BYTES, BadPart, File, Image
from covey.spec import MAX_CALL_TOKENS
from covey.status import JobStatus


def _known(job_id: str, client=None):
    """The job's handle, or a clear error rather than waiting on an id nobody sent."""
    handle = (client or connect()).job(job_id)
    if handle.status() is JobStatus.UNKNOWN:
        raise click.ClickException(
            f"unknown job {job_id}: never submitted, expired, or lost (a Redis restart without persistence)"
        )
    return handle


REPORT_GRACE_SECONDS = 2.0  # after its deadline, for a job's agents to report timed_out


def _live(as_json: bool) -> bool:
    """Draw live progress only for a person at a terminal."""
    return not as_json and sys.stderr.isatty()


_CAP = click.IntRange(0, MAX_COUNT)


def _job_options(fn):
    options = [
        click.option(
            "--strategy",
            default=None,
            help=f"{', '.join(registry.names())}, or one the workers' install registers (default: react)",
        ),
        click.option(
            "--agent",
            default=None,
            help="an OpenAI Agents SDK or pydantic-ai agent to run, module.path:attribute, importable by the workers",
        ),
        click.option("--model", default=None, help="model name (default: COVEY_MODEL, else sim)"),
        click.option("--role", default="root", show_default=True, help="the root agent's role name"),
        click.option("--max-tokens", type=_CAP, default=None, help="token cap of the whole tree"),
        click.option("--max-cost", type=Dollars(), default=None, help="USD the whole tree may spend (priced models)"),
        click.option("--max-cycles", type=_CAP, default=None, help="model calls of the whole tree"),
        click.option("--max-agents", type=_CAP, default=None, help="sub-agents the tree may spawn"),
        click.option("--max-depth", type=_CAP, default=None, help="levels of sub-agents"),
        click.option("--max-tool-calls", type=_CAP, default=None, help="tool calls of the whole tree"),
        click.option(
            "--max-call-tokens",
            type=click.IntRange(1, MAX_CALL_TOKENS),
            default=None,
            help="completion cap of one model call (default 4096)",
        ),
        click.option(
            "--agent-max-cycles",
            type=click.IntRange(1, MAX_COUNT),
            default=None,
            help="model calls each agent may make on its own (default 20)",
        ),
        click.option("--timeout", type=Seconds(), default=None, help="seconds the job may run"),
        click.option(
            "--image",
            "images",
            type=click.File("rb"),
            multiple=True,
            help="an image (PNG, JPEG, GIF or WebP) the model sees with the task (repeatable)",
        ),
        click.option(
            "--file",
            "files",
            type=click.File("rb"),
            multiple=True,
            help="a file put into the job's workspace under its name before it starts (repeatable)",
        ),
        click.option(
            "--budget-notice",
            is_flag=True,
            default=False,
            help="tell each model call what its agent has left (tokens, cost, calls, seconds)",
        ),
        click.option(
            "--no-wrap-up",
            "no_wrap_up",
            is_flag=True,
            default=False,
            help="when the budget runs out, end budget_exceeded instead of asking for a final answer",
        ),
        click.option(
            "--stream",
            is_flag=True,
            default=False,
            help="publish each reply's text as it arrives (model.delta events: covey events JOB --follow)",
        ),
        click.option(
            "--cache",
            is_flag=True,
            default=False,
            help="answer a model call identical to an earlier one from the reply cache, at no charge",
        ),
        click.option(
            "--priority",
            type=click.IntRange(LEAST_URGENT, MOST_URGENT),
            default=None,
            help=f"how soon the broker hands out the job's messages: {MOST_URGENT} the most urgent "
            f"(default {LEAST_URGENT})",
        ),
        click.option(
            "--tenant",
            default=None,
            help="charge the tenant:<name> ledger scope too (create it first: covey scope tenant:<name> ...)",
        ),
        click.option("--instructions", default=None, help="the root agent's instructions (its system prompt)"),
        click.option(
            "--session",
            default=None,
            help="continue this session's conversation, and keep this job's turn in it (covey session show NAME)",
        ),
        click.option(
            "--tools",
            default=None,
            help="comma-separated tools the agents may use, names or patterns (inv__*); "
            "default: covey's built-ins (for --agent: the agent's own alone); * for every tool the workers serve",
        ),
        click.option("--deny", default=None, help="comma-separated tools no agent may use, names or patterns"),
        click.option(
            "--guardrails",
            default=None,
            help="comma-separated guardrails the workers serve that check the job (docs/guardrails.md)",
        ),
        click.option(
            "--approve",
            default=None,
            help="comma-separated patterns of tools (send_*) whose calls wait for a person (covey approve)",
        ),
        click.option(
            "--approval-timeout",
            type=Seconds(),
            default=None,
            help="seconds a call waits for a decision before it counts as denied (default a day)",
        ),
        click.option(
            "--task-file",
            type=click.File("rb"),
            default=None,
            help=f"read the task from a file (UTF-8, at most {inputs.size(inputs.MAX_TASK_BYTES)})",
        ),
        click.option(
            "--option",
            "strategy_options",
            type=KeyValue(),
            multiple=True,
            help="a strategy option, KEY=VALUE with a JSON value (repeatable): --option num_debaters=2",
        ),
        click.option(
            "--model-param",
            "model_params",
            type=KeyValue(),
            multiple=True,
            help="a model parameter, KEY=VALUE with a JSON value (repeatable): --model-param temperature=0.2",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _spec(client, task: str | None, o: dict[str, Any]):
    caps = ("max_tokens", "max_cost", "max_cycles", "max_agents", "max_depth", "max_tool_calls")
    budget = {k: o[k] for k in caps if o[k] is not None}
    if o["timeout"] is not None:
        budget["deadline"] = datetime.now(UTC) + timedelta(seconds=o["timeout"])
    fields: dict[str, Any] = {"role": o["role"], "budget": budget}
    for name in ("strategy", "agent"):  # an agent's strategy is ``agent`` unless one is given
        if o[name] is not None:
            fields[name] = o[name]
    if o["max_call_tokens"] is not None:
        fields["max_call_tokens"] = o["max_call_tokens"]
    for flag in ("budget_notice", "stream", "cache"):
        if o[flag]:
            fields[flag] = True
    if o["no_wrap_up"]:
        fields["wrap_up"] = False
    if o["agent_max_cycles"] is not None:
        fields["max_cycles"] = o["agent_max_cycles"]
    if o["priority"] is not None:
        fields["priority"] = o["priority"]
    # An empty name is passed on, for the spec to refuse, rather than dropped.
    for name in ("model", "tenant", "instructions", "session"):
        if o[name] is not None:
            fields[name] = o[name]
    for name in ("tools", "deny", "approve", "guardrails"):
        if o[name] is not None:
            fields[name] = names(o[name])
    if o["approval_timeout"] is not None:
        fields["approval_timeout"] = o["approval_timeout"]
    for name, given in (("options", o["strategy_options"]), ("model_params", o["model_params"])):
        if given:
            fields[name] = dict(given)
    text, parts = _task(task, o["task_file"]), _parts(o["images"], o["files"])
    return client.spec([text, *parts] if parts else text, **fields)


def _parts(images: tuple[BinaryIO, ...], files: tuple[BinaryIO, ...]) -> list[Image | File]:
    """``--image`` and ``--file`` as the task's parts, each read no further than its cap."""
    parts: list[Image | File] = []
    for flag, given in (("--image", images), ("--file", files)):
        for f in given:
            data = f.read(MAX_BYTES + 1)
            try:
                parts.append(Image(data=data) if flag == "--image" else File(Path(f.name).name, data))
            except BadPart as e:
                raise click.BadParameter(f"{f.name}: {e}", param_hint=flag) from None
    return parts


def _task(task: str | None, task_file) -> str:
    """TASK, ``-`` for standard input, or ``--task-file``; exactly one of them. A
    file's or the input's line ends are no part of the task, as in ``$(cat f)``."""
    if (task is None) == (task_file is None):
        raise click.UsageError("give the task as TASK, as - (read from standard input) or with --task-file, once")
    if task_file is not None:
        return inputs.read_stream(task_file, f"--task-file {task_file.name}", inputs.MAX_TASK_BYTES).rstrip("\n")
    assert task is not None  # exactly one of the two was given
    if task == "-":
        return inputs.read_stream(sys.stdin.buffer, "standard input", inputs.MAX_TASK_BYTES).rstrip("\n")
    return task


@cli.command()
@click.argument("task", required=False)
@_job_options
@click.option("--json", "as_json", is_flag=True, help="print the root AgentResult as JSON")
def run(task: str | None, as_json: bool, **options: Any) -> None:
    """Submit TASK (- reads standard input) and wait; exit 0 only when the job completed."""
    from covey.cli.waiting import wait  # before the job is sent: Ctrl-C during the import would read as "Aborted!"

    client = connect()
    handle = client.submit(_spec(client, task, options))
    timeout = options["timeout"]
    try:  # from the job's line on: a Ctrl-C right after it, before the wait, says the same
        click.echo(f"job {handle.id}", err=True)
        done = wait(handle, None if timeout is None else timeout + REPORT_GRACE_SECONDS, _live(as_json))
    except KeyboardInterrupt:
        interrupted(
            f"job {handle.id} goes on: `covey cancel {handle.id}` stops it, `covey result {handle.id}` waits again"
        )
    _finish(done, as_json)


@cli.command()
@click.argument("task", required=False)
@_job_options
@click.option("--json", "as_json", is_flag=True, help='print {"job_id": ...} as JSON')
def submit(task: str | None, as_json: bool, **options: Any) -> None:
    """Submit TASK (- reads standard input) and print its job id."""
    client = connect()
    job_id = client.submit(_spec(client, task, options)).id
    print_json({"job_id": job_id}) if as_json else click.echo(job_id)


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help='print {"job_id", "status", "stuck", "waits"} as JSON')
def status(job_id: str, as_json: bool) -> None:
    """Print the job's status (and, on standard error, what its agents wait for and
    why it is stuck); exit 1 when the job is unknown."""
    handle = connect().job(job_id)
    state = handle.status()
    live = not state.final and state is not JobStatus.UNKNOWN
    stuck = handle.why_stuck() if live else None
    waits = handle.progress().waits if live else []
    if as_json:
        print_json({"job_id": job_id, "status": state, "stuck": stuck, "waits": waits})
    else:
        click.echo(state)
        if waits:
            click.echo(waiting(waits), err=True)
        if stuck:
            click.echo(f"warning: {stuck}", err=True)
    sys.exit(1 if state is JobStatus.UNKNOWN else 0)


@cli.command()
@click.argument("job_id")
@click.option("--timeout", type=Seconds(), default=None, help="seconds to wait (default: until done)")
@click.option("--json", "as_json", is_flag=True, help="print the root AgentResult as JSON")
def result(job_id: str, timeout: float | None, as_json: bool) -> None:
    """Wait for the job's result; exit 0 only when it completed, 3 when the wait ran out."""
    from covey.cli.waiting import wait

    _finish(wait(_known(job_id), timeout, _live(as_json)), as_json)


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help='print {"job_id", "nodes": [...]} as JSON')
@click.option("--watch", is_flag=True, help="redraw the tree until the job ends (on a terminal)")
def tree(job_id: str, as_json: bool, watch: bool) -> None:
    """Show every agent of the job: status, role, tokens, cycles, elapsed, task."""
    client = connect()
    handle = client.job(job_id)
    if watch:
        from covey.cli.waiting import watch_tree

        _known(job_id, client)  # a watch on an id nobody sent would redraw an empty tree forever
        watch_tree(handle, live=not as_json and sys.stdout.isatty())
    nodes = handle.tree()
    if not nodes:
        raise click.ClickException(f"no agents recorded for job {job_id} (unknown, expired or not started)")
    if as_json:
        print_json({"job_id": job_id, "nodes": [n.model_dump(mode="json", include=_NODE_FIELDS) for n in nodes]})
    elif not (watch and sys.stdout.isatty()):  # a watch leaves its last frame on the screen
        click.echo(render.tree(nodes))


_NODE_FIELDS = {
    "agent_id",
    "parent_id",
    "depth",
    "role",
    "status",
    "usage",
    "task",
    "error",
    "cause",
    "started_at",
    "finished_at",
}


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="print the ledger snapshot as JSON")
def ledger(job_id: str, as_json: bool) -> None:
    """Show the job's budget: used against limits, per agent and per global scope."""
    from covey.budgets.ledger import LedgerError

    try:
        snapshot = connect().job(job_id).ledger()
    except LedgerError as e:  # a row no script of this covey wrote: say so, in one line
        raise click.ClickException(f"ledger of job {job_id} unreadable: {e}") from None
    if not snapshot.agents:
        raise click.ClickException(f"no ledger for job {job_id} (unknown, expired or not started)")
    print_json(snapshot) if as_json else click.echo(render.ledger(snapshot))


@cli.command()
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help='print {"job_id", "cancelled", "status"} as JSON')
def cancel(job_id: str, as_json: bool) -> None:
    """Stop every agent of the job at its next cycle; exit 1 when it had already finished."""
    handle = _known(job_id)
    state = handle.status()
    finished = state.final
    if not finished:
        handle.cancel()
    if as_json:
        print_json({"job_id": job_id, "cancelled": not finished, "status": state})
    elif finished:
        click.echo(f"job {job_id} already finished ({state}); nothing to cancel", err=True)
    else:
        click.echo(f"cancelling {job_id}")
    sys.exit(1 if finished else 0)


def _finish(r, as_json: bool) -> None:
    if as_json:
        print_json(r)
    else:
        click.echo(render.result(r))
    sys.exit(0 if r.ok else 1)
