"""Many OS processes x threads against one small cap: the ledger never overspends.

Each worker reserves then settles with actual usage == its grant (tokens and the
micro-dollars held for them), and sometimes
replays a reservation id as a redelivered task would. Every process has its own
Redis client, so the only thing keeping totals right is the scripts' atomicity;
and across a Sentinel failover, that each write counts only once a replica holds it.
"""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from decimal import Decimal

import redis

from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.ledger import Pricing
from covey.budgets.prices import Price
from covey.budgets.redis_ledger import RedisLedger, ReplicaWait
from covey.config import connections
from tests.integration.test_durability import wait_until
from tests.sentinels import MASTER, SentinelRedis

PROCESSES = 4
THREADS = 8
ATTEMPTS = 40
OUTAGE_SECONDS = 120.0  # COVEY_REDIS_OUTAGE_SECONDS: what a failover may cost a call
# A prompt token costs 2 micro-dollars, a reply token 1.5: the cost cap binds as often as the token caps.
PRICE = Price(input=Decimal(2), output=Decimal("1.5"))
COST_PER_TOKEN_CAP_USD = 1.2e-6  # a scope's cost cap, per token of its token cap


def _ledger(url: str, master: str | None, slots: int) -> RedisLedger:
    """A plain client on a plain Redis; under Sentinel, a worker's: patient, waiting for a replica."""
    if master is None:
        return RedisLedger(redis.Redis.from_url(url, decode_responses=True), keys.DEFAULT_JOB_TTL_SECONDS)
    client = connections.patient_client(url, slots, OUTAGE_SECONDS, master)
    return RedisLedger(client, keys.DEFAULT_JOB_TTL_SECONDS, replicas=ReplicaWait(1, OUTAGE_SECONDS))


def _spend(
    url: str, job: str, chain: list[str], scopes: list[str], worker: int, master: str | None = None
) -> tuple[int, int, int, int]:
    """Runs in a child process: returns (tokens granted, grants, refusals, micro-dollars granted)."""
    ledger = _ledger(url, master, THREADS)
    client = ledger.client
    start = threading.Barrier(THREADS, action=lambda: _all_processes_ready(client, job))

    def thread(t: int) -> tuple[int, int, int, int]:
        rng = random.Random(worker * 1000 + t)
        start.wait()
        granted = grants = refusals = cost = 0
        for i in range(ATTEMPTS):
            rid = f"w{worker}-t{t}:{i}"
            tokens = rng.randint(1, 40)
            pricing = Pricing(model="m", price=PRICE, prompt_tokens=1)
            grant = ledger.reserve(job, chain, scopes, rid, tokens, min(tokens, 5), pricing=pricing)
            if not grant.ok:
                refusals += 1
                continue
            assert grant.tokens <= tokens
            settled = ledger.settle(job, chain, scopes, rid, grant.tokens, cost=grant.cost)
            # A settle run again after a failover cut its first run off answers "already settled".
            assert settled or master is not None
            if rng.random() < 0.2:  # a redelivered step: same grant, never charged again
                again = ledger.reserve(job, chain, scopes, rid, tokens, 1, pricing=pricing)
                assert (again.ok, again.tokens) == (grant.ok, grant.tokens)
                assert not ledger.settle(job, chain, scopes, rid, grant.tokens, cost=grant.cost)
            cost += grant.cost
            granted += grant.tokens
            grants += 1
        return granted, grants, refusals, cost

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(thread, range(THREADS)))
    return tuple(sum(column) for column in zip(*results))


def _all_processes_ready(client: redis.Redis, job: str) -> None:
    """A start line across processes, so they contend instead of running one after another."""
    line = f"test:{job}:ready"
    client.incr(line)
    client.expire(line, 60)
    deadline = time.monotonic() + 30
    while int(client.get(line)) < PROCESSES and time.monotonic() < deadline:
        time.sleep(0.005)


def _open_children(url: str, job: str, worker: int) -> int:
    """Runs in a child process: tries to open THREADS children of the root; returns how many opened."""
    client = redis.Redis.from_url(url, decode_responses=True)
    ledger = RedisLedger(client, keys.DEFAULT_JOB_TTL_SECONDS)
    start = threading.Barrier(THREADS, action=lambda: _all_processes_ready(client, job))

    def thread(t: int) -> bool:
        start.wait()
        return ledger.open(job, ["root"], f"w{worker}-c{t}", Budget(max_depth=0)).ok

    with ThreadPoolExecutor(THREADS) as pool:
        return sum(pool.map(thread, range(THREADS)))


def _processes() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(PROCESSES, mp_context=multiprocessing.get_context("spawn"))


def _capped_job(ledger: RedisLedger, cap: int) -> tuple[str, list[str], list[str]]:
    """A job three deep under a sweep scope capped at ``cap`` tokens and their worth
    in dollars: its id, chain and scopes."""
    job, glob = f"job-{uuid.uuid4().hex}", f"sweep:{uuid.uuid4().hex[:8]}"
    ledger.set_scope(glob, cap, None, max_cost=cap * COST_PER_TOKEN_CAP_USD)
    ledger.open_root(job, "root", Budget(max_tokens=cap + 500, max_cycles=10_000, max_depth=2))
    ledger.open(job, ["root"], "c1", Budget(max_tokens=cap + 300, max_depth=1))
    ledger.open(job, ["root", "c1"], "g1", Budget(max_tokens=cap + 200, max_depth=0))
    return job, ["root", "c1", "g1"], [glob]


def _contend(pool: ProcessPoolExecutor, url: str, job: str, chain: list[str], scopes: list[str], master=None):
    """Every process's (tokens granted, grants, refusals, micro-dollars granted), as futures."""
    return [pool.submit(_spend, url, job, chain, scopes, w, master) for w in range(PROCESSES)]


def _assert_capped(ledger: RedisLedger, job: str, results: list[tuple[int, int, int, int]], cap: int) -> None:
    granted, grants, refusals, cost = (sum(column) for column in zip(*results))
    snap = ledger.snapshot(job)
    scope = snap.scopes[0]
    assert refusals > 0, "the cap was never reached, so nothing contended"
    assert scope.tokens_used == granted == snap.tokens_used <= cap
    assert scope.cycles_used == grants == snap.cycles_used
    assert snap.tokens_reserved == scope.tokens_reserved == 0
    assert scope.cost_used == cost / 1e6 == snap.cost_used <= cap * COST_PER_TOKEN_CAP_USD  # 0 micro-dollars over
    assert scope.cost_reserved == snap.cost_reserved == 0
    for row in snap.agents:
        assert row.tokens_used == granted <= row.tokens_limit
        assert row.tokens_reserved == 0


def test_concurrent_reservations_never_exceed_the_cap(redis_server, redis_client):
    ledger = RedisLedger(redis_client, keys.DEFAULT_JOB_TTL_SECONDS)
    job, chain, scopes = _capped_job(ledger, 2_500)
    with _processes() as pool:
        results = [f.result() for f in _contend(pool, redis_server.url, job, chain, scopes)]
    _assert_capped(ledger, job, results, 2_500)


def test_concurrent_reservations_across_a_failover_never_exceed_the_cap():
    """The master is SIGKILLed while the processes contend, and the replica promoted:
    every grant a process was given is in the new master's ledger, and none past the cap."""
    cap = 15_000  # room for calls before the kill and after it
    with SentinelRedis() as topology:
        ledger = _ledger(topology.url, MASTER, PROCESSES)
        job, chain, scopes = _capped_job(ledger, cap)
        with _processes() as pool:
            running = _contend(pool, topology.url, job, chain, scopes, MASTER)
            wait_until(lambda: ledger.snapshot(job).tokens_used >= cap // 10, "the processes to charge")
            topology.fail_over()
            results = [f.result(timeout=300) for f in running]
        _assert_capped(ledger, job, results, cap)


def test_concurrent_spawns_never_exceed_max_agents(redis_server, redis_client):
    ledger = RedisLedger(redis_client, keys.DEFAULT_JOB_TTL_SECONDS)
    job = f"job-{uuid.uuid4().hex}"
    ledger.open_root(job, "root", Budget(max_agents=5, max_depth=1))

    with _processes() as pool:
        opened = sum(pool.map(_open_children, *zip(*[(redis_server.url, job, w) for w in range(PROCESSES)])))

    snap = ledger.snapshot(job)
    assert opened == snap.agents_spawned == 5
    assert len(snap.agents) == 6
