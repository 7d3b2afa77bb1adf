"""A job whose records vanished from Redis (a wipe): ended at its root, as lost.

A wipe takes each waiting parent's join (its pending children and the resume
its last child sends) with the job's keys, so no resume comes and its root would
wait forever. An agent that finds its
job's root row gone therefore ends the root itself: ``failed`` with cause
``state_lost``, in the tree and in the result store, where clients read it.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import states as celery_states

from covey.context import ROOT_AGENT_ID
from covey.status import AgentStatus, Cause, CauseKind
from covey.store.tree import Node
from covey.worker.deps import Deps

log = logging.getLogger(__name__)


def end_if_lost(deps: Deps, backend: Any, job_id: str, error: str) -> None:
    """End job ``job_id`` ``failed`` (``state_lost``, saying ``error``) if its root's
    ledger row is gone and no result of the root is stored; else leave it be: an
    agent's own lost records are its parent's to handle."""
    try:
        if deps.ledger.agent(job_id, ROOT_AGENT_ID) is not None:
            return
        if backend.get_state(job_id) in celery_states.READY_STATES:
            return
        cause = Cause(kind=CauseKind.STATE_LOST)
        root = Node(agent_id=ROOT_AGENT_ID, status=AgentStatus.FAILED, error=error, cause=cause)
        deps.tree.record(job_id, root)
        backend.store_result(job_id, root.result(job_id).model_dump(mode="json"), celery_states.SUCCESS)
    except Exception:  # the agent's own failure is reported already; this comes on top
        log.exception("job %s: its root could not be ended as lost", job_id)
        return
    log.warning("job %s: its records are gone from Redis; its root ended failed (state_lost)", job_id)
