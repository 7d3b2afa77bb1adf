"""The Python client: submit jobs and follow them from any service.

It talks to covey only through the wire contract (``covey.run_job`` by name), the
job's Redis keys and the workers' catalog, so it needs no worker code and no model
credentials.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult
from celery.utils import uuid
from kombu.exceptions import OperationalError
from redis.exceptions import InvalidResponse

from covey import keys, tenant_keys, wire
from covey.agents import loading
from covey.budgets.cancels import Cancels
from covey.budgets.ledger import LedgerSnapshot, unknown_scope
from covey.budgets.redis_ledger import RedisLedger
from covey.client import approvals as approving
from covey.client import events as following
from covey.client import jobs as listing
from covey.client import sending, strategies, waits
from covey.client.errors import BROKER, REDIS, RESULT_STORE, JobRefused, JobTimeout, StoreUnavailable
from covey.client.jobs import JobEntry
from covey.client.outages import Outage, Waiting
from covey.client.progress import Progress
from covey.config import connections, priorities
from covey.config.celery import create_app
from covey.config.settings import Settings, get_settings
from covey.context import ROOT_AGENT_ID
from covey.events import JobEvent
from covey.orchestration.registry import UnknownStrategy
from covey.results import AgentResult
from covey.spec import InvalidSpec, JobSpec
from covey.status import Cause, CauseKind, JobStatus
from covey.store.approvals import Approval, Approvals, Decided
from covey.store.catalog import NoWorkerServes, WorkerCatalog, check_workers_serve
from covey.store.events import EventStream
from covey.store.jobs import JobIndex
from covey.store.outbox import Message, Outbox
from covey.store.sessions import Session, Sessions
from covey.store.transcripts import Transcript, Transcripts
from covey.store.tree import JobTree, Node
from covey.store.workspace import Workspace

WATCH_INTERVAL_SECONDS = 0.5  # how often a watcher reads the tree and the ledger
FIRST_POLL_SECONDS = 0.01  # an awaited job is looked at again this soon, then half as often each time
RESULT_FETCH_SECONDS = 30.0  # fetching a result already marked ready: bounded, never forever
# One try of a store gives up after this: a one-shot command reports an outage
# within seconds; a wait on a job tries again (covey.client.outages).
CLIENT_OUTAGE_SECONDS = 2.0

# What redis-py, kombu and Celery raise for a store they cannot reach (or that is no Redis).
OUTAGES = (redis.ConnectionError, redis.TimeoutError, InvalidResponse, OperationalError, ConnectionError)


def _outage(error: BaseException | None) -> BaseException | None:
    """The connection failure behind ``error``, if it is one: Celery's result store
    raises a RuntimeError from it once its reconnects run out."""
    while isinstance(error, RuntimeError):
        error = error.__cause__
    return error if isinstance(error, OUTAGES) else None


class Client:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or get_settings()
        self.app = create_app(self.settings.model_copy(update={"redis_outage_seconds": CLIENT_OUTAGE_SECONDS}))
        # Within that window, one attempt: Celery's own retries would wait it out again
        # for each read, and up to 20 times over before it gives up a result subscription.
        self.app.conf.update(
            result_backend_always_retry=False,
            result_backend_transport_options={
                **self.app.conf.result_backend_transport_options,
                "retry_policy": {"max_retries": 0},
            },
        )
        self.redis = connections.client(
            self.settings.redis_url,
            self.settings.redis_master,
            decode_responses=True,
            socket_connect_timeout=CLIENT_OUTAGE_SECONDS,
            socket_timeout=connections.SOCKET_TIMEOUT_SECONDS,
        )
        self.ledger = RedisLedger(self.redis, self.settings.job_ttl)
        self.cancels = Cancels(self.redis, self.settings.job_ttl)
        self.resubscribe = False  # the result store went away under a wait: subscribe again first
        self.tree = JobTree(self.redis, self.settings.job_ttl)
        self.index = JobIndex(self.redis, self.settings.job_ttl)
        self.outbox = Outbox(self.redis)
        self.catalog = WorkerCatalog(self.redis, self.settings.catalog_ttl)
        self.transcripts = Transcripts(self.redis)
        self.events = EventStream(self.redis)
        self.approvals = Approvals(self.redis, self.settings.job_ttl)
        self.sessions = Sessions(self.redis, self.settings.session_ttl, self.settings.session_bytes)

    def spec(self, task: str | list[Any], **fields: Any) -> JobSpec:
        """A validated JobSpec (``task``: its text, or a list of text, ``Image``,
        ``File`` and content parts); what it leaves unset the worker fills from its
        defaults (``COVEY_MODEL``, ``COVEY_MAX_*``). A strategy this machine lacks
        is left for ``check`` to find among what the workers serve."""
        return JobSpec.parse({"task": task, **fields}, workers_decide=True)

    def submit(
        self, spec: JobSpec | dict[str, Any] | str, job_id: str | None = None, subscribe: bool = True
    ) -> JobHandle:
        """Send the job; ``InvalidSpec`` for a bad spec, a scope never created, or a
        tool no worker on this client's queue serves (when any publishes its catalog).

        ``job_id``: the id to send it under (a sweep names it in a claim before the
        job exists), else a new one. ``subscribe``: subscribe to the result before
        the send, which tells a result store that is down from a broker that is; a
        caller that polls results in bulk (a sweep of thousands of jobs) passes False,
        and the job is sent without one (``covey.client.sending``).
        """
        if isinstance(spec, str):
            spec = self.spec(spec)
        elif not isinstance(spec, JobSpec):
            spec = JobSpec.parse(spec, workers_decide=True)
        self.check(spec)
        if job_id is not None:
            self._unused(job_id, spec)
        job_id = job_id or uuid()
        self.send([(job_id, spec)], subscribe)
        return JobHandle(self, job_id)

    def _unused(self, job_id: str, spec: JobSpec) -> None:
        """``InvalidSpec`` if ``job_id`` is already a job sent with another spec: a job's
        id keys its result, so the new spec would read the other job's answer (its
        workers refuse to run it). The same spec again is a resend, and is let through."""
        sent = wire.digest(spec.wire())
        with self._reaching(REDIS):
            submitted = self.index.submission(job_id)
            root = self.redis.hget(keys.agent(job_id, ROOT_AGENT_ID), "digest")
        if (submitted is not None and wire.digest(submitted.spec) != sent) or root not in (None, sent):
            raise InvalidSpec(f"invalid job id: {job_id} is already a job of another spec; submit it under a new id")

    def check(self, spec: JobSpec) -> None:
        """``InvalidSpec`` if the job names a scope never created, or a tool or a model
        no worker on this client's queue serves (when any publishes its catalog), or a
        strategy neither this machine nor those workers have (its options checked
        against the schema they publish)."""
        model = spec.model if "model" in spec.model_fields_set else None  # else the worker's COVEY_MODEL
        if spec.agent is not None:
            try:
                loading.check(spec.agent)  # what is not installed here, only the workers can tell
            except loading.AgentNotFound as e:
                raise InvalidSpec(f"invalid job spec: agent: {e}") from None
        with self._reaching(REDIS):
            unknown = unknown_scope(self.ledger, spec.scopes())
            needed = spec.tools or model or spec.guardrails or not strategies.installed(spec.strategy)
            serving = self.catalog.entries(self.settings.queue) if needed else []
        if unknown:
            raise InvalidSpec(f"invalid job spec: {unknown}")
        queue = self.settings.queue
        try:
            check_workers_serve(serving, spec.tools or [], queue, model, spec.guardrails)
            strategies.check_served(serving, spec.strategy, spec.options, queue)
        except NoWorkerServes as e:
            raise InvalidSpec(f"invalid job spec: {e}") from None
        except UnknownStrategy as e:  # as the spec's own check says it
            raise InvalidSpec(f"invalid job spec: strategy: {e}") from None

    def send(self, jobs: Sequence[tuple[str, JobSpec]], subscribe: bool = True) -> None:
        """``submit`` without ``check``, for jobs as (job id, spec) whose scopes and
        tools were checked (a sweep checks each once, not once a job): all on one
        producer, and recorded in one round trip."""
        messages = [self._run_job(job_id, spec) for job_id, spec in jobs]
        outbox = self.outbox if self.settings.redis_broker else None
        if outbox is not None:  # what a Redis broker loses at a pop is sent again (covey.worker.reconciler)
            with self._reaching(REDIS):
                outbox.expect_roots(messages, int(self.settings.job_ttl))
        sent: list[tuple[str, dict[str, Any]]] = []
        try:
            with self._reaching(BROKER), self.app.producer_or_acquire() as producer:
                for m in messages:
                    if subscribe:
                        # send_task subscribes to the result, then publishes, with errors of the same
                        # types for both stores; subscribing first, apart, tells which one is down.
                        with self._reaching(RESULT_STORE):
                            self.app.backend.on_task_call(producer, m.task_id)
                        self.app.send_task(m.name, kwargs=m.kwargs, task_id=m.task_id, producer=producer, **m.options)
                    else:
                        sending.publish(self.app, producer, m.name, m.task_id, m.kwargs, **m.options)
                    sent.append((m.task_id, m.kwargs["spec"]))
        finally:
            # Marked only once sent, so no job that failed to send shows as queued. No one
            # can ask about an id before submit returns it, and a root that has started
            # tells its own status, so marking after the send races with nothing.
            with self._reaching(REDIS):
                if sent:
                    self.index.record(sent, time.time())
                if outbox is not None and len(sent) < len(messages):
                    outbox.forget_roots(m.task_id for m in messages[len(sent) :])

    def _run_job(self, job_id: str, spec: JobSpec) -> Message:
        """The ``covey.run_job`` that sends ``spec`` as job ``job_id``, on this client's
        queue at the job's priority; signed with ``COVEY_TENANT_KEY`` when it names a
        tenant and one is set."""
        labels = wire.agent(job_id, ROOT_AGENT_ID, spec.role, 0, spec.task)
        kwargs: dict[str, Any] = {"spec": spec.wire()}
        if spec.tenant is not None and self.settings.tenant_key:
            kwargs["signature"] = tenant_keys.sign(self.settings.tenant_key, job_id, wire.digest(kwargs["spec"]))
        priority = priorities.on_broker(spec.priority, self.settings.redis_broker)
        return Message(wire.RUN_JOB, job_id, kwargs, {"queue": self.settings.queue, "priority": priority, **labels})

    def jobs(self, statuses: Collection[JobStatus] = (), tenant: str | None = None, limit: int = 20) -> list[JobEntry]:
        """The newest ``limit`` jobs covey clients submitted whose records still live,
        of these ``statuses`` and this ``tenant`` when given (``covey.client.jobs``)."""
        with self._reaching(REDIS):
            return listing.jobs(self, set(statuses), tenant, limit)

    def retry(self, job_id: str) -> JobHandle:
        """Submit the spec ``job_id`` was sent with again, as a new job (``covey.client.jobs``)."""
        with self._reaching(REDIS):
            spec = listing.again(self, job_id)
        return self.submit(spec)

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` now if Redis is down, before any work starts."""
        with self._reaching(REDIS):
            self.redis.ping()

    @contextmanager
    def _reaching(self, store: str) -> Iterator[None]:
        """Turn a failure to reach ``store`` inside the block into ``StoreUnavailable``."""
        try:
            yield
        except StoreUnavailable:
            raise
        except Exception as e:
            cause = _outage(e)
            if cause is None:
                raise
            url = {REDIS: self.settings.redis_url, BROKER: self.settings.broker, RESULT_STORE: self.settings.backend}
            raise StoreUnavailable(store, url[store], cause) from e

    def queue_has_worker(self, timeout: float = 1.0) -> bool:
        """Whether any live worker consumes this client's queue."""
        with self._reaching(BROKER):
            read = waits.queues_read(self, timeout)
        return read is not None and self.settings.queue in read

    def session(self, name: str) -> Session | None:
        """The session's conversation so far (None: no job ran on it, or it expired)."""
        with self._reaching(REDIS):
            return self.sessions.read(name)

    def delete_session(self, name: str) -> bool:
        """Forget the session and any job's claim on it; False if there was none."""
        with self._reaching(REDIS):
            return self.sessions.delete(name)

    def pending(self) -> list[Approval]:
        """The tool calls of every job waiting for a person's decision, oldest first."""
        return approving.waiting(self)

    def job(self, job_id: str) -> JobHandle:
        return JobHandle(self, job_id)

    def workspace(self, job_id: str) -> Workspace:
        return Workspace(self.redis, job_id, self.settings.job_ttl)

    def put_file(self, job_id: str, path: str, data: bytes | str) -> str:
        """Put a file (text or bytes, at most 256 KiB) into the job's workspace at
        ``path``, where any agent's ``read_file`` reads it; returns the path written.
        Put before ``submit(spec, job_id=...)`` under the same id, it is there when
        the job starts. ``WorkspaceError`` for a path that escapes the workspace, a
        file too large, a workspace full."""
        with self._reaching(REDIS):
            return self.workspace(job_id).write("", path, data)

    def run(self, spec: JobSpec | dict[str, Any] | str, timeout: float | None = None) -> AgentResult:
        """Submit and wait for the result, as ``covey run`` does."""
        return self.submit(spec).result(timeout=timeout)

    async def arun(self, spec: JobSpec | dict[str, Any] | str, timeout: float | None = None) -> AgentResult:
        """``run`` for asyncio services."""
        handle = await asyncio.to_thread(self.submit, spec)
        return await handle.aresult(timeout=timeout)

    def close(self) -> None:
        self.redis.close()


def poll_delays(interval: float) -> Iterator[float]:
    """The waits between an awaited job's looks: from ``FIRST_POLL_SECONDS``, doubling
    to ``interval``, so a job done in milliseconds is seen in milliseconds (a fixed
    half second made ``await arun()`` fifty times slower than ``run()``) and a long
    one costs a read every ``interval``."""
    delay = min(FIRST_POLL_SECONDS, interval)
    while True:
        yield delay
        delay = min(delay * 2, interval)


class JobHandle:
    def __init__(self, client: Client, job_id: str) -> None:
        self._client = client
        self.id = job_id
        self._async = AsyncResult(job_id, app=client.app)

    def status(self) -> JobStatus:
        """``queued``, ``running``, ``waiting`` (on its children), a final
        ``AgentResult`` status, ``refused`` or ``unknown``.

        ``unknown``: never submitted, expired, or lost (a Redis restart without
        persistence); a job another Celery client sent is ``queued`` while its
        message waits in the broker, whatever the queue.
        """
        client = self._client
        with client._reaching(REDIS):
            root = client.tree.node(self.id, ROOT_AGENT_ID)
        if root is not None:
            return JobStatus.of_root(root.status)
        with client._reaching(RESULT_STORE):
            state = self._async.state
        if state == "FAILURE":
            return JobStatus.REFUSED
        if state == "STARTED":
            return JobStatus.RUNNING
        with client._reaching(REDIS):
            submitted = client.redis.exists(keys.submitted(self.id))
        with client._reaching(BROKER):
            return JobStatus.QUEUED if submitted or waits.queue_of(client, self.id) else JobStatus.UNKNOWN

    def done(self) -> bool:
        """Whether the job's result (or its refusal) is in."""
        with self._client._reaching(RESULT_STORE):
            return self._async.ready()

    def progress(self, elapsed: float = 0.0) -> Progress:
        return Progress.of(self.id, self.tree(), self.ledger(), elapsed)

    def watch(
        self, interval: float = WATCH_INTERVAL_SECONDS, timeout: float | None = None, waiting: Waiting | None = None
    ) -> Iterator[Progress]:
        """Yield the job's progress every ``interval`` seconds until it ends (the
        last one yielded is final) or ``timeout`` runs out; then fetch ``result()``.
        A store away meanwhile is waited out (``covey.client.outages``), ``waiting`` told."""
        started = time.monotonic()
        outage = Outage(self._client.settings.redis_outage_seconds, waiting)
        while True:
            elapsed = time.monotonic() - started
            ended, progress = outage.ride(functools.partial(self._look, elapsed))
            yield progress
            if ended or (timeout is not None and elapsed >= timeout):
                return
            time.sleep(interval if timeout is None else max(0.0, min(interval, timeout - elapsed)))

    def _look(self, elapsed: float) -> tuple[bool, Progress]:
        """Whether the job ended, and its progress, read in that order (so a final
        progress follows ``True``)."""
        return self.done(), self.progress(elapsed)

    async def aresult(self, timeout: float | None = None, interval: float = WATCH_INTERVAL_SECONDS) -> AgentResult:
        """``result()`` for asyncio services: waits without blocking the event loop."""
        started = time.monotonic()
        delays = poll_delays(interval)
        while not await asyncio.to_thread(self.done):
            waited = time.monotonic() - started
            if timeout is not None and waited >= timeout:
                raise JobTimeout(self.id, waited, await asyncio.to_thread(self._diagnosis))
            delay = next(delays)
            await asyncio.sleep(delay if timeout is None else min(delay, timeout - waited))
        return await asyncio.to_thread(self.result, RESULT_FETCH_SECONDS)

    def why_stuck(self) -> str | None:
        """Why the job is not moving, in one line (see ``covey.client.waits``), or None.

        A store is tried again for ``CLIENT_OUTAGE_SECONDS`` before ``StoreUnavailable``:
        after a Redis restart the first use of a pooled connection fails, and the next
        one, on a fresh connection, does not."""
        return Outage(CLIENT_OUTAGE_SECONDS, lambda _: None).ride(self._why_stuck_once)

    def _why_stuck_once(self) -> str | None:
        try:
            with self._client._reaching(BROKER):
                return waits.why_stuck(self._client, self.id)
        except StoreUnavailable:
            self._client.ping()  # it reads the tree from Redis too: blame Redis if that is what is down
            raise

    def _diagnosis(self) -> str | None:
        """``why_stuck`` for a wait that ran out: a store still away is the reason."""
        try:
            return self.why_stuck()
        except StoreUnavailable as e:
            return str(e)

    def result(
        self, timeout: float | None = None, diagnose: bool = True, waiting: Waiting | None = None
    ) -> AgentResult:
        """Wait for the root's result; raises ``JobTimeout`` (saying why the job is
        stuck, when ``diagnose`` and that is known) or ``JobRefused``. A result store
        away meanwhile is waited out (``covey.client.outages``), ``waiting`` told:
        ``StoreUnavailable`` once away too long, ``JobTimeout`` if ``timeout`` ends first."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout

        def fetch() -> Any:
            # Not propagated: rebuilt here, the worker's own error (a Redis it could not
            # reach, say) would read as this client's.
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            with self._client._reaching(RESULT_STORE):
                try:
                    if self._client.resubscribe:
                        # Celery's result consumer, once its one reconnect failed, no
                        # longer listens; reconnecting reads the results missed meanwhile.
                        self._async.backend.result_consumer._reconnect()
                        self._client.resubscribe = False
                    return self._async.get(timeout=left, propagate=False)
                except Exception as e:
                    self._client.resubscribe = self._client.resubscribe or _outage(e) is not None
                    raise

        try:
            raw = Outage(self._client.settings.redis_outage_seconds, waiting).ride(fetch, deadline)
        except CeleryTimeout as e:
            self._stop_waiting()
            waited = time.monotonic() - started
            raise JobTimeout(self.id, waited, self._diagnosis() if diagnose else None) from e
        except StoreUnavailable as e:
            if deadline is None or time.monotonic() < deadline:
                raise  # away past COVEY_REDIS_OUTAGE_SECONDS
            raise JobTimeout(self.id, time.monotonic() - started, str(e)) from e  # the wait ran out first
        except KeyboardInterrupt:
            self._stop_waiting()
            raise
        if not self._async.successful():  # read from the result just fetched
            kind = CauseKind.INVALID_SPEC if isinstance(raw, InvalidSpec) else CauseKind.INTERNAL
            raise JobRefused(str(raw), Cause(kind=kind))
        return AgentResult.model_validate(raw)

    def _stop_waiting(self) -> None:
        """Unsubscribe from the result now: left to AsyncResult.__del__ at
        interpreter exit, the unsubscribe fails and prints a traceback."""
        self._async.backend.remove_pending_result(self._async)

    def tree(self) -> list[Node]:
        with self._client._reaching(REDIS):
            return self._client.tree.nodes(self.id)

    def ledger(self) -> LedgerSnapshot:
        with self._client._reaching(REDIS):
            return self._client.ledger.snapshot(self.id)

    def transcript(self, agent: str = ROOT_AGENT_ID) -> Transcript | None:
        """What ``agent`` sent and got back, call by call, as its worker recorded it
        (``COVEY_TRANSCRIPTS``); None when it has none: it made no call yet, its
        worker records none, or the job's records expired (``COVEY_JOB_TTL``)."""
        with self._client._reaching(REDIS):
            return self._client.transcripts.read(self.id, agent)

    def events(
        self, after: str | None = None, follow: bool = False, timeout: float | None = None
    ) -> Iterator[JobEvent]:
        """The job's events in the order they happened (``covey.events``), after the
        event ``after`` (a ``JobEvent.id``; from the first without). With ``follow``,
        waits for more until the job's last (``job.finished``) or, for a job that
        ends without one (refused), its end; ``timeout`` bounds that wait
        (``JobTimeout``, saying why the job is stuck). An unknown job is
        ``UnknownJob``, an id the job's stream lacks ``UnknownEvent``. Reading
        holds no worker slot."""
        return following.events(self, after, follow, timeout)

    async def aevents(
        self, after: str | None = None, follow: bool = False, timeout: float | None = None
    ) -> AsyncIterator[JobEvent]:
        """``events()`` for asyncio services: each read waits in a thread, not the event loop."""
        events = await asyncio.to_thread(self.events, after, follow, timeout)
        while (event := await asyncio.to_thread(next, events, None)) is not None:
            yield event

    def pending(self) -> list[Approval]:
        """The job's tool calls waiting for a person's decision, oldest first."""
        return approving.waiting(self._client, self.id)

    def approve(self, call_id: str) -> Decided:
        """Let the waiting call ``call_id`` run (once); a second decision counts for
        nothing (``Decided.recorded`` is False and its approval says what stands)."""
        return approving.decide(self, call_id, "approved")

    def deny(self, call_id: str, reason: str | None = None) -> Decided:
        """Refuse the waiting call ``call_id``: it never runs, and the model reads the reason."""
        return approving.decide(self, call_id, "denied", reason)

    def files(self) -> dict[str, int]:
        """Each file of the job's workspace and its size in bytes, by path (none for an unknown job)."""
        with self._client._reaching(REDIS):
            return self._client.workspace(self.id).sizes()

    def get_file(self, path: str) -> bytes:
        """A file of the job's workspace, as bytes (``.decode()`` a text file);
        ``WorkspaceError`` when it holds none at ``path``."""
        with self._client._reaching(REDIS):
            return self._client.workspace(self.id).read_bytes(path)

    def put_file(self, path: str, data: bytes | str) -> str:
        """``Client.put_file`` for this job."""
        return self._client.put_file(self.id, path, data)

    def cancel(self) -> None:
        """Every agent of the job stops and reports ``cancelled``: at its next
        step, within half a second of a model call in flight (abandoned, and
        charged its reservation: it may be billed); one waiting for a scope's cap
        or window, or for a person's decision (its calls are denied), is taken up
        at once to end."""
        with self._client._reaching(REDIS):
            self._client.cancels.cancel_job(self.id)
        with self._client._reaching(BROKER):
            waits.wake_waiting(self._client, self.id)
        approving.deny_all(self, approving.CANCELLED)
