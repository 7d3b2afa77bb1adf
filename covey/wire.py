"""The names covey's tasks travel under, how they read in Flower and in a
worker's log, and the plain text every layer shows people (``cut``, ``table``).

``RUN_JOB`` is the wire contract other services send to; the others are covey's
own, sent worker to worker. A task reads as its job, agent, role and depth and the
first words of its task, never a whole prompt, a spec's secrets or a child's
results: Celery shows ``argsrepr``/``kwargsrepr`` in place of the real arguments
when a message carries them."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any

RUN_JOB = "covey.run_job"  # a job's root agent; the job id is the task id
AGENT = "covey.agent"  # a sub-agent, sent by its parent's fan-out
RESUME = "covey.resume"  # sent by a waiting parent's last child to finish: resumes it
PROCEED = "covey.proceed"  # an agent taken up again after its slice ran out

# How an agent's system message says a conversation (a session's turns) comes before
# its task, and how many messages: models, and the sim, tell the new task from it.
HISTORY = "The conversation so far, {} messages, comes before the task."
TASK_WORDS = 8  # enough of a task to tell siblings apart at a glance
ELLIPSIS = "…"  # one character, so a cut text keeps the length it is cut to


def canonical(payload: Any) -> bytes:
    """One byte string per JSON value, whatever the order of its keys."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(payload: Any) -> str:
    """A fingerprint of a JSON value (a job's spec as sent): the same for the same
    value, however it was sent. A job's root row keeps its spec's, which tells a
    copy of the job's message from another spec sent under its id."""
    return hashlib.sha256(canonical(payload)).hexdigest()


def cut(text: str, chars: int) -> str:
    """``text``, or its start and an ellipsis in ``chars`` characters: how covey
    shows a text too long for its place (a tree node, a table cell)."""
    return text if len(text) <= chars else text[: chars - 1] + ELLIPSIS


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` is one of ``patterns``: each a name, or a shell-style pattern
    (``inv__*``, ``read_?ile``, ``[ab]*``) matched case-sensitively, as a spec's tools
    and deny rules are read."""
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name a typo of ``name`` most likely meant, for a "did you mean"; None for none near."""
    near = difflib.get_close_matches(name, list(known), n=1)
    return near[0] if near else None


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns padded to their widest cell, ``-`` for None; no trailing spaces."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def first_words(text: str, words: int = TASK_WORDS) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (f" {ELLIPSIS}" if len(parts) > words else "")


def agent(job_id: str, agent_id: str, role: str, depth: int, task: str) -> dict[str, str]:
    """The repr options of a task that runs one agent (``covey.run_job``, ``covey.agent``)."""
    return {
        "argsrepr": "()",
        "kwargsrepr": f"job={job_id} agent={agent_id} role={role} depth={depth} task={first_words(task)!r}",
    }


def resume(job_id: str, agent_id: str, spawn_round: int, children: int, step: int | None = None) -> dict[str, str]:
    """The repr options of the task that resumes a waiting agent after its ``children``
    (as each finishes: after the ``step`` it waits at, which tells its resumes apart)."""
    at = f"round={spawn_round}" if step is None else f"round={spawn_round} step={step}"
    return {"argsrepr": f"[{children} child results]", "kwargsrepr": f"job={job_id} agent={agent_id} {at}"}


def proceed(job_id: str, agent_id: str, step: int) -> dict[str, str]:
    """The repr options of the task that takes up an agent after its last task's slice."""
    return {"argsrepr": "()", "kwargsrepr": f"job={job_id} agent={agent_id} step={step}"}
