"""A waiting agent's join with its children: which end resumes it, and with which results.

A parent that fans out records how it joins its children in the script that saves
its checkpoint (``covey.store.checkpoints``), and each child's final record counts
it off in the script that writes its end (``covey.store.tree``); both run
``lua/join.lua`` on the parent's join keys (``keys``). ``all``: the last child to
end sends the parent's resume. ``each``: the next child to end while the parent
is idle sends it, handing over itself (its batch); children that end while the
parent runs are handed over at its next wait. ``now``: as ``each``, but the
resume is due at once, for a parent that holds results of children refused at
open already. The parent reads its batch when it is resumed (``batch``), and its
end retires the join (``retired``).
"""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

import redis

from covey import keys as key_names

Join = Literal["all", "each", "now"]

LUA = (files("covey.store") / "lua" / "join.lua").read_text(encoding="utf-8")


def kind(as_completed: bool, holds_results: bool) -> Join:
    """How an agent joins its children: all at once, as each finishes, or at once
    (``holds_results``: it holds refused children's results already)."""
    if not as_completed:
        return "all"
    return "now" if holds_results else "each"


def keys(job_id: str, waiter: str) -> list[str]:
    """The waiter's join keys, in the order ``lua/join.lua``'s ``join_keys`` reads them."""
    return [
        key_names.pending(job_id, waiter),
        key_names.joins(job_id),
        key_names.awaited(job_id, waiter),
        key_names.done(job_id, waiter),
        key_names.batch(job_id, waiter),
    ]


def retired(job_id: str, agent_id: str) -> list[str]:
    """The join keys an agent's own end makes obsolete (those of ``each`` joins: a join
    ``all`` empties its pending set itself)."""
    return [key_names.awaited(job_id, agent_id), key_names.done(job_id, agent_id), key_names.batch(job_id, agent_id)]


def batch(client: redis.Redis, job_id: str, agent_id: str) -> set[str]:
    """The finished children the agent's expected resume hands it (``each``)."""
    return {str(m) for m in client.smembers(key_names.batch(job_id, agent_id))}
