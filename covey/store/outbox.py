"""The job's outbox: every message an agent step sends, recorded before it is sent.

The ledger is the source of truth and messages are hints. A step records the
message that goes on with its agent (a continuation, its children, the resume its
last child sends) in the same script that advances its checkpoint, under the task
id the message will carry; the step that takes a message up checks it is the one
recorded, so a duplicate, a replay or a stale redelivery is dropped before it
writes anything, and a recorded message that reached no queue (its sender died,
or the broker lost it at a pop) is found and sent again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from covey import keys, redis_scripts
from covey.context import ROOT_AGENT_ID
from covey.redis_scripts import ScriptCall

_EXPECT = redis_scripts.source(__package__, "expect.lua")


@dataclass(frozen=True)
class Message:
    """One task message as Celery's ``send_task`` takes it: its name, its task id,
    its keyword arguments and its options (Flower's labels, ``ignore_result``, links)."""

    name: str
    task_id: str
    kwargs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)

    def dumps(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def loads(cls, raw: str) -> Message:
        return cls(**json.loads(raw))

    def send(self, app: Any) -> None:
        """Send it with Celery ``app``, exactly as recorded."""
        app.send_task(self.name, kwargs=self.kwargs, task_id=self.task_id, add_to_parent=False, **self.options)

    def now(self) -> Message | None:
        """This message without its countdown, to send at once; None if it has none
        (it is no waiting agent's next step)."""
        if "countdown" not in self.options:
            return None
        return Message(
            self.name, self.task_id, self.kwargs, {k: v for k, v in self.options.items() if k != "countdown"}
        )

    def carried_by(self, name: str, task_id: str, kwargs: dict[str, Any]) -> bool:
        """Whether a delivery of task ``name`` under ``task_id`` with ``kwargs`` is this message."""
        return (self.name, self.task_id, self.kwargs) == (name, task_id, kwargs)

    @property
    def queue(self) -> str | None:
        """The queue it is sent to; None for one recorded before messages named theirs
        (it went to its sender's default queue)."""
        return self.options.get("queue")

    def seen_as(self, headers: dict[str, Any]) -> bool:
        """Whether a broker message with these headers is this one: its id, task and
        labels (which name the round or step of an agent's later messages)."""
        wanted = (self.task_id, self.name, self.options.get("kwargsrepr"))
        return (headers.get("id"), headers.get("task"), headers.get("kwargsrepr")) == wanted


def queues_of(messages: Iterable[Message], queues: Iterable[str]) -> list[str]:
    """``queues`` and every other queue one of ``messages`` is sent to: where to look
    for them (a job's messages go to the queue it was sent to, which may be none of
    a worker's or client's own)."""
    return list(dict.fromkeys([*queues, *(m.queue for m in messages if m.queue is not None)]))


class Outbox:
    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._expect = client.register_script(_EXPECT)

    def expect_roots(self, messages: Sequence[Message], ttl: int) -> None:
        """Record each job's ``run_job`` (its task id the job's) as its root's next
        message, before it is sent: one the broker loses at a pop is then sent again
        like any step's. One round trip; a job whose root has opened is left as it is."""
        calls = [
            ScriptCall(
                self._expect,
                [keys.expected(m.task_id), keys.expecting(), keys.agent(m.task_id, ROOT_AGENT_ID)],
                [ROOT_AGENT_ID, m.dumps(), ttl, m.task_id],
            )
            for m in messages
        ]
        redis_scripts.run(self._redis, calls)

    def forget_roots(self, job_ids: Iterable[str]) -> None:
        """Drop the root messages recorded for jobs whose send failed (or that a worker
        refused): nothing is to be sent again for them."""
        with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hdel(keys.expected(job_id), ROOT_AGENT_ID)
            pipe.execute()

    def expected(self, job_id: str, agent_id: str) -> str | None:
        """The message the agent's next step is, as stored (``Message.loads`` reads it)."""
        raw = self._redis.hget(keys.expected(job_id), agent_id)
        return None if raw is None else str(raw)

    def jobs(self) -> list[str]:
        return sorted(str(job_id) for job_id in self._redis.smembers(keys.expecting()))

    def messages(self, job_id: str) -> dict[str, Message]:
        """Agent id -> the message its next step is; none, and the job leaves the index."""
        return self.messages_of([job_id])[job_id]

    def messages_of(self, job_ids: Sequence[str]) -> dict[str, dict[str, Message]]:
        """``messages`` of each job, read in one round trip (and the jobs expecting
        none dropped from the index in one more): a reconciler's look at thousands of
        a sweep's jobs cost two round trips a job."""
        with self._redis.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hgetall(keys.expected(job_id))
            read = dict(zip(job_ids, pipe.execute(), strict=True))
        done = [job_id for job_id, raw in read.items() if not raw]
        if done:
            self._redis.srem(keys.expecting(), *done)
        return {
            job_id: {str(agent_id): Message.loads(str(m)) for agent_id, m in raw.items()}
            for job_id, raw in read.items()
        }
