"""An agent's end: one path for completion, failure, cancel and a crash.

However an agent ends, the same things happen in one round trip: its final node
is written once (never over a final one), with its result's status, usage and
end time; what it kept only while running is retired (its checkpoint, its model
calls' stored replies and, if it joined its children as each finished, those
joins); its parent's join counts it off; and its last transcript entries are
appended. Children it still waits on as each finishes are of no use any more
and are cancelled. A step that crashed ends its agent here too, from whatever
it knows of it: the running state when there is one, else the agent's node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from covey import keys
from covey.budgets.ledger import Settling
from covey.redis_scripts import ScriptCall
from covey.results import Usage
from covey.status import AgentStatus, Cause, CauseKind
from covey.store import join
from covey.store.transcripts import Entries
from covey.store.tree import Node
from covey.worker import sessions
from covey.worker.agent_state import AgentState
from covey.worker.deps import Deps
from covey.worker.redaction import redact

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ended:
    """The agent's final node as it stands (another end's, if that one came first),
    whether this end wrote it, and the parent's resume it made due (as stored): the
    caller sends it."""

    node: Node
    written: bool
    resume: str | None


def retired(job_id: str, agent_id: str, state: AgentState | None) -> list[str]:
    """The keys an agent's end makes obsolete: those it holds (all of them, when no
    running state says which)."""
    kept = [
        (keys.checkpoint(job_id, agent_id), state is None or state.step),
        (keys.replies(job_id, agent_id), state is None or state.cycle),
    ]
    retire = [key for key, held in kept if held]
    if state is None or state.as_completed:
        retire += join.retired(job_id, agent_id)
    return retire


def end(
    deps: Deps,
    job_id: str,
    node: Node,
    state: AgentState | None = None,
    transcript: Entries | None = None,
    also: Callable[[str], Sequence[ScriptCall]] | None = None,
    settling: Settling | None = None,
) -> Ended:
    """Write the agent's final ``node`` and retire what it kept (``retired``); see
    ``JobTree.finish`` for ``also`` and ``settling``."""
    if state is not None and state.as_completed:  # its children still running are of no use now
        deps.cancels.cancel_agents(job_id, [p.agent_id for p in state.pending if p.refused is None])
    retire = retired(job_id, node.agent_id, state)
    closing = sessions.ending(deps, job_id, state.spec, node) if state is not None else None
    if closing is not None:  # a root on a session: its turn kept and the session given back, in the same round trip
        also = _then(also, closing)
    written, resume = deps.tree.finish(job_id, node, retire, transcript=transcript, also=also, settling=settling)
    if not written:  # a duplicate of a step that already ended: the first end stands
        node = deps.tree.node(job_id, node.agent_id) or node
    return Ended(node, written, resume)


def _then(
    also: Callable[[str], Sequence[ScriptCall]] | None, more: Callable[[str], Sequence[ScriptCall]]
) -> Callable[[str], Sequence[ScriptCall]]:
    """``also``'s calls, then ``more``'s, each given the final record."""

    def calls(record: str) -> Sequence[ScriptCall]:
        return [*(also(record) if also is not None else []), *more(record)]

    return calls


def failed(node: Node, error: str, spent: Usage | None, cause: CauseKind, at: datetime) -> Node:
    """``node`` ended ``failed`` at ``at``, keeping where it sits, its task and what it spent."""
    return node.model_copy(
        update={
            "status": AgentStatus.FAILED,
            "usage": spent or node.usage,
            "error": redact(error),  # an exception's text may quote a key
            "cause": Cause(kind=cause),
            "output": None,
            "data": None,
            "wait": None,
            "finished_at": at,
        }
    )


def crashed(
    deps: Deps,
    job_id: str,
    agent_id: str,
    error: str,
    state: AgentState | None,
    cause: CauseKind = CauseKind.INTERNAL,
    transcript: Entries | None = None,
) -> Ended:
    """End an agent whose step broke, ``failed`` saying ``error``: as its running
    ``state`` stands (what it spent, its place in the tree), else as its node does.
    Redis beyond reach leaves its message expected in the outbox: the reconciler
    sends it again, and the rerun ends it."""
    known = state.node(AgentStatus.FAILED) if state is not None else Node(agent_id=agent_id)
    node = failed(known, error, state.usage if state is not None else None, cause, deps.now())
    try:
        if state is None and (recorded := deps.tree.node(job_id, agent_id)) is not None:
            node = failed(recorded, error, None, cause, deps.now())
        return end(deps, job_id, node, state, transcript)
    except Exception:
        log.exception("agent %s of job %s: its failure could not be recorded in Redis", agent_id, job_id)
        return Ended(node, False, None)
