"""What a step did with its delivery: the one value every step returns.

A step never raises for what it decides. It reads, runs its transition and
commits, then says in a ``Completion`` what becomes of the message that carried
it: it ran (and the task returns a value, or hands its agent on to the next
message), it was not this delivery's to run (a duplicate, a stale or forged
message: dropped), Redis or the broker was away (handed back, to run again), or
the job cannot run at all (refused). ``covey.worker.tasks`` maps each kind to
Celery in one table; nothing else in the worker knows Celery's ``Ignore`` or
``Reject``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Kind(Enum):
    DONE = "done"  # the step ran: the task returns ``value``
    HANDED_ON = "handed_on"  # the step ran and its agent goes on in the message it sent: nothing is stored
    DROP = "drop"  # not this delivery's to run: acknowledged, nothing read or written for it
    HAND_BACK = "hand_back"  # Redis or the broker away: the message goes back to the broker
    REFUSE = "refuse"  # a job that cannot run: the task fails with ``reason`` (``InvalidSpec``)


@dataclass(frozen=True)
class Completion:
    kind: Kind
    value: dict[str, Any] | str | None = None  # DONE: the task's return value
    reason: str = ""  # DROP, HAND_BACK, REFUSE: the line the worker logs
    level: int = logging.INFO  # the level of that line
    stored: bool = True  # DONE: whether Celery stores ``value`` (False: the agent's final record stored it)

    @classmethod
    def done(cls, value: dict[str, Any] | str, stored: bool = True) -> Completion:
        return cls(Kind.DONE, value, stored=stored)

    @classmethod
    def drop(cls, reason: str, level: int = logging.INFO) -> Completion:
        return cls(Kind.DROP, reason=reason, level=level)

    @classmethod
    def hand_back(cls, reason: str) -> Completion:
        return cls(Kind.HAND_BACK, reason=reason, level=logging.WARNING)

    @classmethod
    def refuse(cls, reason: str) -> Completion:
        return cls(Kind.REFUSE, reason=reason, level=logging.WARNING)


HANDED_ON = Completion(Kind.HANDED_ON)


def taken_over(job_id: str, agent_id: str) -> Completion:
    """The step's delivery was put back on its queue by another worker while this
    process was quiet past its heartbeat: that worker runs the step, this copy is dropped."""
    return Completion.drop(
        f"agent {agent_id} of job {job_id}: its delivery was put back on its queue by another worker; "
        "this copy dropped",
        logging.WARNING,
    )
