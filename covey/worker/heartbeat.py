"""A worker process's heartbeat in the broker's Redis, and what it learns after a lapse.

The heartbeat is a key with a short TTL (``COVEY_WORKER_HEARTBEAT_SECONDS``),
set again several times a TTL by a thread of the process that consumes. While
it stands, no other worker touches this process's deliveries, however slow its
steps. Once it lapses (the process died, was stopped, starved or cut off from
Redis) another worker may put them back on their queues (``covey.worker.takeover``).
A worker's heartbeat names its Celery node, so a reader tells the deliveries a
worker runs from those a process that runs no tasks holds (``covey.config.deliveries``).
The next heartbeat after a lapse reads which deliveries this process still
holds: the others were taken, and the steps running them drop them
(``taken``), so no step is finished by two workers.
"""

from __future__ import annotations

import logging
import time
import uuid
from importlib.resources import files

import redis
from kombu.utils.encoding import bytes_to_str

from covey import keys
from covey.config.deliveries import beat_value
from covey.config.holder import Holder

log = logging.getLogger(__name__)

_BEAT = (files("covey.worker") / "lua" / "heartbeat.lua").read_text(encoding="utf-8")


class Heartbeat:
    def __init__(
        self, client: redis.Redis, holder: Holder, seconds: float, kept_seconds: float, node: str = ""
    ) -> None:
        self.holder, self.seconds, self.node = holder, seconds, node
        self._kept = max(1, int(kept_seconds))
        self._client, self._beat = client, client.register_script(_BEAT)
        self._keys = [keys.worker_alive(holder.id), keys.worker_held(holder.id), keys.workers()]
        self._answered = ""  # the token of the last beat whose reply came back

    def beat(self) -> None:
        """Say this process is alive; after a lapse, mark what was taken from it."""
        holder = self.holder
        with holder.lock:
            sent, ttl_ms, before = time.monotonic(), int(self.seconds * 1000), set(holder.inflight)
            token = beat_value(uuid.uuid4().hex, ttl_ms, self.node)  # the key stands at least a TTL from here
            reply = self._beat(keys=self._keys, args=[holder.id, ttl_ms, self._kept, self._answered, token])
            self._answered = token
            held = None if reply == 1 else {bytes_to_str(tag) for tag in reply}
            if held is not None and (late := list(holder.inflight - before - held)):
                held |= self._still_held(late)
            gone = holder.renewed(sent, self.seconds, held)
        if gone:
            log.warning("worker %s: its heartbeat had lapsed; %d of its deliveries were taken", holder.id, len(gone))

    def _still_held(self, tags: list[str]) -> set[str]:
        """Of ``tags``, delivered while the beat was on its way (its reply may predate their
        record), those Redis holds for this process now: the rest were taken."""
        with self._client.pipeline(transaction=False) as pipe:
            for tag in tags:
                pipe.sismember(self._keys[1], tag)
            return {tag for tag, held in zip(tags, pipe.execute()) if held}

    def taken(self, tag: str) -> bool:
        """Whether another worker took delivery ``tag`` from this process. While the
        last heartbeat stands, this costs no round trip."""
        if not self.holder.sure():
            self.beat()
        return tag in self.holder.taken
