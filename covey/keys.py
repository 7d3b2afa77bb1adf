"""Every Redis key covey writes, and how long each lives.

A job's keys share the ``{job_id}`` hash tag, so they sit in one Redis Cluster slot
and one Lua script may touch a whole ancestor chain. Global scopes are not per job
and carry no tag.

Every key is written with a TTL, and a script that finds a row it must charge
missing (a Redis wiped) refuses rather than make it again without one. The one
exception is on purpose: a scope's caps (``scope``, ``scopes_index``), which an
operator sets and which must not lapse.
"""

from __future__ import annotations

PREFIX = "covey"

# A job's ledger rows, checkpoints, tree and workspace outlive its run by a week
# unless COVEY_JOB_TTL says otherwise, so `covey tree/ledger` still answer after
# the job ends; the result backend's `result_expires` is set to the same span.
# The stores take the TTL in their constructors: this module reads no settings.
DEFAULT_JOB_TTL_SECONDS = 7 * 24 * 3600


# A reservation not settled within this span belongs to a dead worker and is
# released. It must exceed one model call with all the SDK's retries.
RESERVATION_TTL_SECONDS = 600


def _job(job_id: str) -> str:
    return f"{PREFIX}:{{{job_id}}}"


def submitted(job_id: str) -> str:
    """JSON {spec, at}: the spec a covey client sent and when (epoch seconds), written
    once it is sent, so a queued job is told from an unknown id and ``covey retry``
    can send it again."""
    return f"{_job(job_id)}:submitted"


def jobs() -> str:
    """Sorted set across jobs: job id -> when it was submitted (epoch seconds), for
    ``covey jobs``. Each submit drops the members older than a job's TTL and gives
    the set that TTL again, so it holds only jobs whose records still live."""
    return f"{PREFIX}:jobs"


def agent(job_id: str, agent_id: str) -> str:
    """Ledger hash of one agent: limits, used and reserved for its subtree."""
    return f"{_job(job_id)}:agent:{agent_id}"


def agents(job_id: str) -> str:
    """Set of every agent id the ledger opened for the job."""
    return f"{_job(job_id)}:agents"


def calls(job_id: str) -> str:
    """Hash: reservation id -> JSON of what a live reservation holds and where, then,
    once settled, the tokens it was granted; makes settle and reserve idempotent."""
    return f"{_job(job_id)}:calls"


def events(job_id: str) -> str:
    """Stream: the job's events in the order they happened (``covey.events``), each
    written by the script that writes the state it reports; kept a job's TTL past
    the last."""
    return f"{_job(job_id)}:events"


def cancel(job_id: str) -> str:
    """Flag that every agent of the job checks each cycle."""
    return f"{_job(job_id)}:cancel"


def replies(job_id: str, agent_id: str) -> str:
    """Hash: reservation id -> the settled call's outcome (reply and usage, or error),
    so a redelivered step replays it instead of calling the model again. Deleted
    when the agent finishes."""
    return f"{_job(job_id)}:replies:{agent_id}"


def checkpoint(job_id: str, agent_id: str) -> str:
    """Hash: a paused or waiting agent's step and its state, read back by the task
    that takes it up again. Deleted when the agent finishes."""
    return f"{_job(job_id)}:state:{agent_id}"


def transcript(job_id: str, agent_id: str) -> str:
    """Hash: entry key -> JSON of one model call (the messages it sent, its reply) or
    tool call, plus the cap's counters (``covey.store.transcripts``). Kept for the
    job's TTL after the agent ends, unlike its replies."""
    return f"{_job(job_id)}:transcript:{agent_id}"


def expected(job_id: str) -> str:
    """Hash: agent id -> JSON of the one message its next step is (name, task id,
    kwargs, options), recorded before it is sent: the job's outbox. A step whose
    message is not the one recorded here is dropped; one recorded here that is in
    no queue is sent again (``covey.worker.reconciler``)."""
    return f"{_job(job_id)}:expected"


def pending(job_id: str, agent_id: str) -> str:
    """Set of a waiting agent's children that have not finished: each child's final
    record removes itself, and the one that empties it sends the agent's resume."""
    return f"{_job(job_id)}:pending:{agent_id}"


def joins(job_id: str) -> str:
    """Hash: waiting agent id -> JSON of the resume message its last child sends
    (``join="all"``), or the next child to finish (``join="each"``, while it is idle)."""
    return f"{_job(job_id)}:joins"


def awaited(job_id: str, agent_id: str) -> str:
    """Set of an agent's ``join="each"`` children that have not finished; each
    child's final record moves itself to ``done``, or to ``batch`` and sends the
    agent's resume when it is idle."""
    return f"{_job(job_id)}:awaited:{agent_id}"


def done(job_id: str, agent_id: str) -> str:
    """Set of ``join="each"`` children that finished while their parent ran: its
    next wait hands them over at once."""
    return f"{_job(job_id)}:done:{agent_id}"


def batch(job_id: str, agent_id: str) -> str:
    """Set of the finished children the agent's expected resume hands it: fixed
    when that resume is recorded, so a redelivery joins the same ones."""
    return f"{_job(job_id)}:batch:{agent_id}"


def stopped(job_id: str) -> str:
    """Set of agent ids their parent cancelled: each, and every agent under it, ends
    ``cancelled`` at its next step."""
    return f"{_job(job_id)}:stopped"


def approvals(job_id: str) -> str:
    """Hash: tool call id -> JSON of its approval: asked for by an agent, then the
    person's decision (``covey.store.approvals``)."""
    return f"{_job(job_id)}:approvals"


def held(job_id: str) -> str:
    """Hash: agent id -> JSON of the message that takes it up again, held out of the
    outbox while it waits for a decision on a tool call; a decision moves it there."""
    return f"{_job(job_id)}:held"


def approvals_due() -> str:
    """Sorted set across jobs: ``<job id> <call id>`` of every approval not yet
    decided -> when it counts as denied (unix seconds), for ``covey approvals`` and
    the workers that expire them. It lives as long as the newest job added to it."""
    return f"{PREFIX}:approvals:due"


def approvals_lock() -> str:
    """Held by the one worker at a time that expires approvals past their deadline."""
    return f"{PREFIX}:approvals:lock"


def model_reply(digest: str) -> str:
    """JSON of a model call's reply and what it cost, under the digest of the request
    (covey.store.model_cache); kept COVEY_CACHE_TTL after it was last written."""
    return f"{PREFIX}:cache:{digest}"


def session(name: str) -> str:
    """JSON of a session's conversation: its turns (task, answer, job) oldest first,
    and how many were dropped past its size cap. Kept COVEY_SESSION_TTL past its last job."""
    return f"{PREFIX}:{{session:{name}}}"


def session_job(name: str) -> str:
    """The id of the job running on a session now: one at a time, never interleaved."""
    return f"{PREFIX}:{{session:{name}}}:job"


def expecting() -> str:
    """Set across jobs of the job ids whose outbox (``expected``) may hold messages,
    so the reconciler looks at those jobs only; a member whose outbox is gone is dropped.
    It lives as long as the newest job added to it (a job's TTL)."""
    return f"{PREFIX}:expecting"


# One worker at a time reconciles; the lock outlives a pass, and lapses on its own
# when the worker holding it dies.
RECONCILE_LOCK_SECONDS = 30


def reconciler_lock() -> str:
    return f"{PREFIX}:reconciler"


# Broker deliveries and who holds them: these keys live in the broker's Redis,
# beside kombu's ``unacked`` hash, so one transaction covers both.


def workers() -> str:
    """Set of the worker processes (holders) that hold or held broker deliveries."""
    return f"{PREFIX}:workers"


def worker_alive(holder: str) -> str:
    """A worker process's heartbeat; it lapses COVEY_WORKER_HEARTBEAT_SECONDS after
    the last one, and then the process counts as dead."""
    return f"{PREFIX}:worker:{holder}:alive"


def worker_held(holder: str) -> str:
    """Set of the delivery tags (kombu's ``unacked`` fields) a worker process holds."""
    return f"{PREFIX}:worker:{holder}:held"


def takeover_lock() -> str:
    """One worker at a time puts dead workers' deliveries back (``covey.worker.takeover``)."""
    return f"{PREFIX}:takeover"


def nodes(job_id: str) -> str:
    """Hash: agent id -> JSON node of the job's tree (role, depth, status, usage)."""
    return f"{_job(job_id)}:nodes"


def workspace(job_id: str) -> str:
    """Hash: normalised path -> file content, shared by every agent of the job."""
    return f"{_job(job_id)}:workspace"


def workspace_writer(job_id: str) -> str:
    """Lock: held by the one tool call writing the job's workspace."""
    return f"{_job(job_id)}:workspace:writer"


def job_scopes(job_id: str) -> str:
    """Set of the global scope names this job charged, so its ledger snapshot shows them."""
    return f"{_job(job_id)}:scopes"


def live_reservations() -> str:
    """Sorted set across jobs: JSON [job id, reservation id] -> expiry. Lets any
    reserve release a dead worker's hold on a global scope, whatever its job."""
    return f"{PREFIX}:reservations"


def tenant(name: str) -> str:
    """Hash of a tenant's key record: the nonce its key is derived from, the key's
    fingerprint and what its jobs may use (``covey.store.tenants``). No TTL."""
    return f"{PREFIX}:tenant:{name}"


def scope(name: str) -> str:
    """Ledger hash of a global scope (`global`, `tenant:<x>`, `sweep:<id>`)."""
    return f"{PREFIX}:scope:{name}"


# A scope's per-minute window lives two minutes: long enough to be read in the
# minute after, short enough that windows never pile up.
WINDOW_SECONDS = 60
WINDOW_TTL_SECONDS = 2 * WINDOW_SECONDS


def scope_window(name: str, minute: int) -> str:
    """Hash of the tokens and requests granted on a scope in one epoch minute
    (``tokens``, ``requests``), checked against its ``tpm_limit``/``rpm_limit``."""
    return f"{PREFIX}:scope:{name}:window:{minute}"


# A running slot's lease: its worker renews it every third of this span while the
# agent's step runs, so a slot held by a worker that died frees up within it.
RUNNING_LEASE_SECONDS = 30


def scope_running(name: str) -> str:
    """Sorted set of the agents holding a running slot on a scope: JSON [job id,
    agent id] -> lease expiry, counted against the scope's ``running_limit``. It
    lives one lease past its last write."""
    return f"{PREFIX}:scope:{name}:running"


def scope_holders(name: str) -> str:
    """Hash: an agent holding a running slot on a scope (JSON [job id, agent id]) ->
    the run of its step that holds it, so a copy of the same step's message cannot
    run beside it. It lives as long as the running set."""
    return f"{PREFIX}:scope:{name}:holders"


# A scope's queue of waiting agents lives this long past the last agent joining it;
# every waiter asks again within a hop (seconds), so it lapses only once no one waits.
WAITING_TTL_SECONDS = 3600


def scope_waiting(name: str) -> str:
    """Sorted set of the agents waiting for a running slot on a scope: JSON [job id,
    agent id] -> its turn (a virtual finish tag, ``scope_turns``). A step that gives
    a slot back admits the lowest."""
    return f"{PREFIX}:scope:{name}:waiting"


def scope_turns(name: str) -> str:
    """Hash of a capped scope's weighted fair queue: ``virtual`` -> the turn of the
    waiter admitted last, and each tenant's scope name ('' for jobs of no tenant) ->
    the turn of its last waiter to join. It lives as long as the queue."""
    return f"{PREFIX}:scope:{name}:turns"


# A slot held for a waiter that was admitted and woken, until its step takes it:
# long enough for a busy worker to fetch the woken step, short enough that a wake
# lost with its worker holds a slot back only briefly (a hop is at most 10 s).
WAKE_LEASE_SECONDS = 10


def scope_woken(name: str) -> str:
    """Sorted set of the waiters admitted to a scope's slots and woken, not yet
    running: JSON [job id, agent id] -> when the slot held for it lapses. They count
    against the scope's ``running_limit``; it lives one wake lease past its last write."""
    return f"{PREFIX}:scope:{name}:woken"


def scopes_index() -> str:
    """Set of every global scope name ever charged."""
    return f"{PREFIX}:scopes"


# A worker's catalog entry (what it serves) lives COVEY_CATALOG_TTL past its last
# heartbeat, refreshed every third of that, so a worker killed without a word
# drops out of `covey tools` within the TTL while one slow heartbeat loses nothing.
DEFAULT_CATALOG_TTL_SECONDS = 30


def _catalog() -> str:
    # One hash tag: the index and every entry sit in one Redis Cluster slot, read with one MGET.
    return f"{PREFIX}:{{catalog}}"


def catalog_workers() -> str:
    """Set of the worker names that published a catalog entry; a member whose entry
    expired is dropped by the next worker to publish. It lives as long as the newest entry."""
    return f"{_catalog()}:workers"


def catalog_entry(worker: str) -> str:
    """JSON of what one worker (a Celery node name) serves: its queues, tools and models."""
    return f"{_catalog()}:worker:{worker}"


# A sweep's submitter holds this lease while it runs and renews it every second;
# units it claimed are adopted by another submitter only once its lease lapsed.
SWEEP_OWNER_TTL_SECONDS = 5


def sweep_claim(sweep_id: str, unit: str) -> str:
    """JSON {job, owner, recorded}: the job running (or that ran) one unit of a
    sweep, so two submitters never both run it. Lives as long as a job's keys."""
    return f"{PREFIX}:sweep:{sweep_id}:claim:{unit}"


def sweep_cancel(sweep_id: str) -> str:
    """Flag set by ``covey sweep-cancel``: the sweep's submitters send no more jobs
    and cancel those in flight. A rerun clears it. Lives as long as a job's keys."""
    return f"{PREFIX}:sweep:{sweep_id}:cancel"


def sweep_owner(sweep_id: str, owner: str) -> str:
    """A live submitter's lease (see ``SWEEP_OWNER_TTL_SECONDS``)."""
    return f"{PREFIX}:sweep:{sweep_id}:owner:{owner}"


def demo() -> str:
    """Marks a database of a Redis that ``covey demo`` found empty and runs in; the
    demo empties the database again when it ends, this key with the rest."""
    return f"{PREFIX}:demo"
