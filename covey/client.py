"""The Python client: submit jobs and follow them from any service.

It talks to covey only through the wire contract (``covey.run_job`` by name) and
the job's Redis keys, so it needs no worker code and no model credentials.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import redis
from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult
from celery.utils import uuid

from covey import keys, labels, waits
from covey.budgets.ledger import LedgerSnapshot, unknown_scope
from covey.budgets.redis_ledger import RedisLedger
from covey.config.celery import create_app
from covey.config.settings import Settings, get_settings
from covey.context import ROOT_AGENT_ID
from covey.progress import Progress
from covey.results import AgentResult
from covey.spec import InvalidSpec, JobSpec
from covey.store.tree import QUEUED, RUNNING, JobTree, Node

RUN_JOB = "covey.run_job"
UNKNOWN = "unknown"
WATCH_INTERVAL_SECONDS = 0.5  # how often a watcher reads the tree and the ledger
RESULT_FETCH_SECONDS = 30.0  # fetching a result already marked ready: bounded, never forever


class JobRefused(Exception):
    """The worker refused the job (an invalid spec) or the job crashed before its root ran."""


class JobTimeout(TimeoutError):
    """``result(timeout)`` ran out before the job finished; the job goes on.
    ``reason`` says why it is stuck, when that is known."""

    def __init__(self, job_id: str, waited: float, reason: str | None) -> None:
        self.job_id, self.waited, self.reason = job_id, waited, reason
        super().__init__(f"job {job_id} not finished after {waited:.1f}s" + (f": {reason}" if reason else ""))


class Client:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.app = create_app(self.settings)
        self.redis = redis.Redis.from_url(self.settings.redis_url, decode_responses=True)
        self.ledger = RedisLedger(self.redis)
        self.tree = JobTree(self.redis)

    def spec(self, task: str, **fields: Any) -> JobSpec:
        """A validated JobSpec; what it leaves unset the worker fills from its
        defaults (``COVEY_MODEL``, ``COVEY_MAX_*``)."""
        return JobSpec.parse({"task": task, **fields})

    def submit(self, spec: JobSpec | dict[str, Any] | str) -> JobHandle:
        if isinstance(spec, str):
            spec = self.spec(spec)
        elif not isinstance(spec, JobSpec):
            spec = JobSpec.parse(spec)
        unknown = unknown_scope(self.ledger, spec.scopes())
        if unknown:
            raise InvalidSpec(f"invalid job spec: {unknown}")
        job_id = uuid()
        self.redis.set(keys.submitted(job_id), 1, ex=keys.JOB_TTL_SECONDS)
        self.app.send_task(
            RUN_JOB, kwargs={"spec": spec.wire()}, task_id=job_id,
            **labels.agent(job_id, ROOT_AGENT_ID, spec.role, 0, spec.task),
        )
        return JobHandle(self, job_id)

    def queue_has_worker(self, timeout: float = 1.0) -> bool:
        """Whether any live worker consumes this client's queue."""
        replies = self.app.control.inspect(timeout=timeout).active_queues() or {}
        return any(q.get("name") == self.settings.queue for queues in replies.values() for q in queues)

    def job(self, job_id: str) -> JobHandle:
        return JobHandle(self, job_id)

    def run(self, spec: JobSpec | dict[str, Any] | str, timeout: float | None = None) -> AgentResult:
        """Submit and wait for the result, as ``covey run`` does."""
        return self.submit(spec).result(timeout=timeout)

    async def arun(self, spec: JobSpec | dict[str, Any] | str, timeout: float | None = None) -> AgentResult:
        """``run`` for asyncio services."""
        handle = await asyncio.to_thread(self.submit, spec)
        return await handle.aresult(timeout=timeout)

    def close(self) -> None:
        self.redis.close()


class JobHandle:
    def __init__(self, client: Client, job_id: str) -> None:
        self._client = client
        self.id = job_id
        self._async = AsyncResult(job_id, app=client.app)

    def status(self) -> str:
        """``queued``, ``running``, ``waiting`` (on its children), a final
        ``AgentResult`` status, ``refused`` or ``unknown``.

        ``unknown``: never submitted, expired, or lost (a Redis restart without
        persistence); a job another Celery client sent is ``queued`` while its
        message waits in the broker, whatever the queue.
        """
        root = self._client.tree.node(self.id, ROOT_AGENT_ID)
        if root is not None:
            return root.status
        state = self._async.state
        if state == "FAILURE":
            return "refused"
        if state == "STARTED":
            return RUNNING
        if self._client.redis.exists(keys.submitted(self.id)) or waits.queue_of(self._client, self.id):
            return QUEUED
        return UNKNOWN

    def done(self) -> bool:
        """Whether the job's result (or its refusal) is in."""
        return self._async.ready()

    def progress(self, elapsed: float = 0.0) -> Progress:
        return Progress.of(self.id, self.tree(), self.ledger(), elapsed)

    def watch(self, interval: float = WATCH_INTERVAL_SECONDS, timeout: float | None = None) -> Iterator[Progress]:
        """Yield the job's progress every ``interval`` seconds until it ends (the
        last one yielded is final) or ``timeout`` runs out; then fetch ``result()``."""
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            ended = self.done()
            yield self.progress(elapsed)
            if ended or (timeout is not None and elapsed >= timeout):
                return
            time.sleep(interval if timeout is None else max(0.0, min(interval, timeout - elapsed)))

    async def aresult(self, timeout: float | None = None, interval: float = WATCH_INTERVAL_SECONDS) -> AgentResult:
        """``result()`` for asyncio services: waits without blocking the event loop."""
        started = time.monotonic()
        while not await asyncio.to_thread(self.done):
            waited = time.monotonic() - started
            if timeout is not None and waited >= timeout:
                raise JobTimeout(self.id, waited, await asyncio.to_thread(self.why_stuck))
            await asyncio.sleep(interval if timeout is None else min(interval, timeout - waited))
        return await asyncio.to_thread(self.result, RESULT_FETCH_SECONDS)

    def why_stuck(self) -> str | None:
        """Why the job is not moving, in one line (see ``covey.waits``), or None."""
        return waits.why_stuck(self._client, self.id)

    def result(self, timeout: float | None = None, diagnose: bool = True) -> AgentResult:
        """Wait for the root's result; raises ``JobTimeout`` (saying why the job is
        stuck, when ``diagnose`` and that is known) or ``JobRefused``."""
        started = time.monotonic()
        try:
            raw = self._async.get(timeout=timeout, propagate=True)
        except CeleryTimeout as e:
            self._stop_waiting()
            waited = time.monotonic() - started
            raise JobTimeout(self.id, waited, self.why_stuck() if diagnose else None) from e
        except KeyboardInterrupt:
            self._stop_waiting()
            raise
        except Exception as e:
            if self._async.state == "FAILURE":  # the worker refused it; Celery rebuilt its error
                raise JobRefused(str(e)) from e
            raise
        return AgentResult.model_validate(raw)

    def _stop_waiting(self) -> None:
        """Unsubscribe from the result now: left to AsyncResult.__del__ at
        interpreter exit, the unsubscribe fails and prints a traceback."""
        self._async.backend.remove_pending_result(self._async)

    def tree(self) -> list[Node]:
        return self._client.tree.nodes(self.id)

    def ledger(self) -> LedgerSnapshot:
        return self._client.ledger.snapshot(self.id)

    def cancel(self) -> None:
        """Every agent of the job stops at its next cycle and reports ``cancelled``."""
        self._client.ledger.cancel(self.id)
