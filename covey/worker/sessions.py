"""A root agent on a session (``covey.store.sessions``): it starts from the session's
turns, and its end keeps its own and gives the session back."""

from __future__ import annotations

from collections.abc import Callable

from covey.redis_scripts import ScriptCall
from covey.spec import AgentSpec, Said
from covey.status import AgentStatus
from covey.store.sessions import Busy, Turn
from covey.store.tree import Node
from covey.worker.deps import Deps


def joined(deps: Deps, job_id: str, spec: AgentSpec) -> AgentSpec | str:
    """The root's spec with the session's conversation before its own history; or
    why it cannot run: the job that runs on the session now."""
    if spec.session is None:
        return spec
    claimed = deps.sessions.claim(spec.session, job_id, deps.settings.job_ttl)
    if isinstance(claimed, Busy):
        return f"session {spec.session} is in use by job {claimed.job_id}: the jobs of a session run one at a time"
    said = [Said.model_validate(m) for m in claimed.messages()]
    update: dict[str, object] = {"history": [*said, *spec.history]}
    if claimed.dropped:  # said in the system message, where the transcript shows it
        dropped = f"({claimed.dropped} earlier turns of session {spec.session} were dropped: past COVEY_SESSION_BYTES)"
        update["instructions"] = f"{spec.instructions} {dropped}".strip()
    return spec.model_copy(update=update)


def ending(deps: Deps, job_id: str, spec: AgentSpec, node: Node) -> Callable[[str], list[ScriptCall]] | None:
    """For a root on a session, the script call of its end, given its final record:
    its turn kept when it completed, and the session given back."""
    name = spec.session
    if name is None or node.parent_id is not None:
        return None
    turn = None
    if node.status is AgentStatus.COMPLETED:
        turn = Turn(job_id=job_id, task=spec.task, answer=node.output or "", at=node.finished_at or deps.now())
    return lambda record: [deps.sessions.ending(name, job_id, turn, record)]
