"""A waiting agent's state in Redis: saved before its children are sent, read by ``resume``.

One key per agent, holding the step beside the state, so many steps reuse it, a
redelivered step can tell its own from a later one, and finishing deletes it. The
same script records the messages the step sends (``covey.store.outbox``) and
how it joins its children (``covey.store.join``), so a checkpoint never stands
without the messages that go on from it. The state is
opaque JSON here; the worker parses it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from covey import keys, redis_scripts
from covey.redis_scripts import Reply
from covey.store import join, transcripts, tree
from covey.store.join import Join
from covey.store.outbox import Message
from covey.store.transcripts import Entries
from covey.store.tree import Node

_SAVE = transcripts.script("advance.lua", join.LUA, tree.NODES)

# What ``Checkpoints.save`` did: nothing (another run went on), saved, or saved with the resume due now.
STALE, SAVED, WOKEN = Reply.MOVED_ON, Reply.OK, Reply.WOKEN


@dataclass(frozen=True)
class Checkpoint:
    round: int
    state: str

    @classmethod
    def of(cls, spawn_round: Any, state: Any) -> Checkpoint | None:
        """The checkpoint of the key's two fields as read (``HMGET round state``), or None."""
        return None if spawn_round is None or state is None else cls(round=int(spawn_round), state=state)


class Checkpoints:
    def __init__(self, client: redis.Redis, job_ttl: int) -> None:
        self._redis, self._job_ttl = client, job_ttl
        self._save = client.register_script(_SAVE)

    def save(
        self,
        job_id: str,
        agent_id: str,
        step: int,
        state: str,
        taken: str | None = None,
        then: Message | None = None,
        resume: Message | None = None,
        children: Sequence[tuple[str, Message]] = (),
        join_kind: Join = "all",
        transcript: Entries | None = None,
        *,
        node: Node,
        awaiting: Sequence[str] = (),
        approvals: Sequence[str] = (),
    ) -> int:
        """Store ``state`` for ``step`` and, in the same script, the messages the step
        sends: ``then`` (the agent's continuation), or ``children`` (agent id, message)
        and the ``resume`` that joins them as ``join_kind`` says (``covey.store.join``);
        the agent's ``node`` as the step leaves it (never over a final one) and the
        event of its move (naming the children it is ``awaiting``); and its
        ``transcript`` entries so far. An agent waiting for a person's decision on
        tool calls (``approvals``, their ids) has ``then`` held, out of the outbox,
        until a decision sends it (``covey.store.approvals``). ``taken``
        is the expected message the step took up, as stored (None: it took up none).

        ``STALE``, with nothing written, if a newer step is stored or ``taken`` is no
        longer expected: the step is stale and must send nothing. ``SAVED``; or
        ``WOKEN`` when the resume is due now (children finished while the step ran),
        or a decision on one of ``approvals`` came: the caller sends it (with the children)."""
        args: list[str | int] = [
            step,
            state,
            self._job_ttl,
            job_id,
            agent_id,
            taken or "",
            then.dumps() if then else "",
            resume.dumps() if resume else "",
            join_kind,
            tree.pack(node),
            tree.FINALS,
            json.dumps(list(approvals)) if approvals else "",
        ]
        for child_id, message in children:
            args += [child_id, message.dumps()]
        job_keys = [keys.checkpoint(job_id, agent_id), keys.expected(job_id), keys.expecting()]
        more_keys, more_args = transcripts.tail(transcript)
        event_keys, event_args = redis_scripts.events_tail(
            keys.events(job_id), self._job_ttl, [tree.moved(node, awaiting)]
        )
        return int(
            self._save(
                keys=[
                    *job_keys,
                    *join.keys(job_id, agent_id),
                    keys.nodes(job_id),
                    keys.held(job_id),
                    keys.approvals(job_id),
                    *more_keys,
                    *event_keys,
                ],
                args=[*args, *more_args, *event_args],
            )
        )

    def load(self, job_id: str, agent_id: str) -> Checkpoint | None:
        return Checkpoint.of(*self._redis.hmget(keys.checkpoint(job_id, agent_id), "round", "state"))
