"""The Python client: submit jobs and follow them from any service.

It talks to covey only through the wire contract (``covey.run_job`` by name) and
the job's Redis keys, so it needs no worker code and no model credentials.
"""

from __future__ import annotations

from typing import Any

import redis
from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult
from celery.utils import uuid

from covey import keys
from covey.budgets.ledger import LedgerSnapshot
from covey.budgets.redis_ledger import RedisLedger
from covey.config.celery import create_app
from covey.config.settings import Settings, get_settings
from covey.context import ROOT_AGENT_ID
from covey.results import AgentResult
from covey.spec import JobSpec
from covey.store.tree import RUNNING, JobTree, Node

RUN_JOB = "covey.run_job"
UNKNOWN = "unknown"


class JobRefused(Exception):
    """The worker refused the job (an invalid spec) or the job crashed before its root ran."""


class JobTimeout(TimeoutError):
    """``result(timeout)`` ran out before the job finished; the job goes on."""


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
        job_id = uuid()
        self.redis.set(keys.submitted(job_id), 1, ex=keys.JOB_TTL_SECONDS)
        self.app.send_task(RUN_JOB, kwargs={"spec": spec.wire()}, task_id=job_id)
        return JobHandle(self, job_id)

    def queue_has_worker(self, timeout: float = 1.0) -> bool:
        """Whether any live worker consumes this client's queue."""
        replies = self.app.control.inspect(timeout=timeout).active_queues() or {}
        return any(q.get("name") == self.settings.queue for queues in replies.values() for q in queues)

    def job(self, job_id: str) -> JobHandle:
        return JobHandle(self, job_id)

    def close(self) -> None:
        self.redis.close()


class JobHandle:
    def __init__(self, client: Client, job_id: str) -> None:
        self._client = client
        self.id = job_id
        self._async = AsyncResult(job_id, app=client.app)

    def status(self) -> str:
        """``queued``, ``running``, a final ``AgentResult`` status, ``refused`` or ``unknown``.

        ``unknown``: never submitted by a covey client, expired, or sent by another
        Celery client and not yet picked up by a worker.
        """
        root = self._client.tree.node(self.id, ROOT_AGENT_ID)
        if root is not None:
            return root.status
        state = self._async.state
        if state == "FAILURE":
            return "refused"
        if state == "STARTED":
            return RUNNING
        return "queued" if self._client.redis.exists(keys.submitted(self.id)) else UNKNOWN

    def result(self, timeout: float | None = None) -> AgentResult:
        """Wait for the root's result; raises ``JobTimeout`` or ``JobRefused``."""
        try:
            raw = self._async.get(timeout=timeout, propagate=True)
        except CeleryTimeout as e:
            self._stop_waiting()
            raise JobTimeout(f"job {self.id} not finished after {timeout:g}s") from e
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
