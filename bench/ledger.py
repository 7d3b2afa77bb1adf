"""What covey's Redis ledger sustains, and what its atomic scripts buy over a plain counter.

Run from the repo root: ``python bench/ledger.py [--json PATH]``.

- throughput: reserve+settle pairs per second through ``RedisLedger``, from 1
  process and from 8 at once, each its own Redis client (a worker's, one slot)
  driving one agent at depth 2 of a job (root, parent, agent; the scopes of a
  job without tenant or sweep), as a worker's model calls would. Medians of interleaved rounds after
  a warm-up, so the noise of a shared machine hits both alike.
- WAIT: pairs on a second private redis-server with a replica of its own, from
  one client, alternately as they run by default (no wait) and with the ledger
  waiting for the replica (``COVEY_LEDGER_REPLICAS=1``, on by default under
  Sentinel), pair by pair, so a load that comes and goes on a shared machine
  falls on both alike: the medians' difference is what ``WAIT`` adds to a pair.
- race: 32 threads, released together by a barrier, each ask for 100 of the
  last 1,000 tokens under a cap. A check-then-charge counter (GET, compare,
  INCRBY: two round trips) lets more of them through than fit; covey's reserve
  checks and holds in one Lua script, so it must never charge past the cap.

The private redis-servers are started here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import signal
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/ledger.py` puts bench/, not the root, on the path

import redis

from bench.harness import RedisServer, cpu_seconds, interruptible, private_redis, report, start_redis
from covey import keys
from covey.budgets.budget import Budget
from covey.budgets.ledger import AgentTerms
from covey.budgets.redis_ledger import RedisLedger
from covey.config import connections

try:
    from covey.budgets.redis_ledger import ReplicaWait
except ImportError:  # a covey from before the ledger could wait (bench/all.py --before): no WAIT figures
    ReplicaWait = None
from covey.context import ROOT_AGENT_ID
from covey.spec import JobSpec

PROCESSES = [1, 8]
PAIRS = 2_000  # per process and round
ROUNDS = 5
# One model call's reservation: prompt estimate plus its completion cap, at least
# the prompt plus a short reply; what it then spends.
RESERVE, FLOOR, SPEND = 4_596, 564, 1_000
RACERS, TRIALS = 32, 20
CAP, LEFT, ASK = 10_000, 1_000, 100
TIMEOUT = 120.0  # seconds a stuck process or thread is waited for
REPLICAS = 1  # what COVEY_LEDGER_REPLICAS is by default under Sentinel
COMMAND = "python bench/ledger.py"

# (JSON key, what the table calls it); pairs/s are higher-is-better, overspends lower.
FIGURES = [
    ("pairs_per_s_1", "reserve+settle pairs/s, 1 process"),
    ("pairs_per_s_8", "reserve+settle pairs/s, 8 processes"),
    ("naive_overspend_max", "check-then-charge: tokens past the cap, worst trial"),
    ("naive_overspend_total", "check-then-charge: tokens past the cap, all trials"),
    ("covey_overspend_max", "covey: tokens past the cap, worst trial"),
    ("covey_overspend_total", "covey: tokens past the cap, all trials"),
]


# --- a job on the ledger, opened as the worker opens one ---


def open_root(ledger: RedisLedger, budget: Budget) -> tuple[str, list[str]]:
    """A fresh job's root with the terms ``run_job`` gives it; the job id and its scopes."""
    job = JobSpec(task="bench", budget=budget)
    job_id = str(uuid.uuid4())
    terms = AgentTerms(tools=job.tools, deny=job.deny, max_cycles=job.max_cycles, scopes=job.scopes())
    ledger.open_root(job_id, ROOT_AGENT_ID, job.budget, terms)
    return job_id, job.scopes()


def open_child(
    ledger: RedisLedger, job_id: str, chain: list[str], budget: Budget, scopes: list[str], max_cycles: int
) -> tuple[list[str], Budget]:
    """A child of ``chain[-1]`` asking its share of ``budget``: its chain and the budget it was granted."""
    child = f"{chain[-1]}-sub-{uuid.uuid4().hex[:8]}"
    opened = ledger.open(job_id, chain, child, budget.child(), AgentTerms(max_cycles=max_cycles, scopes=scopes))
    if not opened.ok or opened.budget is None:
        raise RuntimeError(f"opening {child} was refused: {opened.reason}")
    return [*chain, child], opened.budget


def spend(
    ledger: RedisLedger,
    job_id: str,
    chain: list[str],
    scopes: list[str],
    cycle: int,
    tokens: int,
    floor: int,
    used: int,
) -> bool:
    """One model call's ledger traffic: reserve, then settle what it used; False if refused."""
    rid = f"{chain[-1]}:{cycle}"
    grant = ledger.reserve(job_id, chain, scopes, rid, tokens=tokens, min_tokens=floor, cycle=cycle)
    if grant.ok:
        ledger.settle(job_id, chain, scopes, rid, tokens=used)
    return grant.ok


# --- throughput ---


def drive(url: str, job_id: str, chain: list[str], scopes: list[str], barrier, done) -> None:
    """One process standing for a worker: its own client, built as a worker's is
    (``connections.patient_client``), ``PAIRS`` calls of its agent once all are ready."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it, on Ctrl-C too
    try:
        ledger = RedisLedger(connections.patient_client(url, 1, TIMEOUT), keys.DEFAULT_JOB_TTL_SECONDS)
        ledger.client.ping()
        barrier.wait()
        for cycle in range(1, PAIRS + 1):
            if not spend(ledger, job_id, chain, scopes, cycle, RESERVE, FLOOR, SPEND):
                raise RuntimeError(f"{chain[-1]} was refused call {cycle}")
    except Exception as e:
        done.put(f"{type(e).__name__}: {e}")
    else:
        done.put(None)


def pairs_per_second(ledger: RedisLedger, url: str, n: int) -> float:
    """Reserve+settle pairs per second of ``n`` processes, each an agent at depth 2 of one job."""
    root_budget = Budget(max_tokens=10**12, max_cycles=10**6, max_agents=100, max_depth=2)
    job_id, scopes = open_root(ledger, root_budget)
    parent, parent_budget = open_child(ledger, job_id, [ROOT_AGENT_ID], root_budget, scopes, 1)
    chains = [open_child(ledger, job_id, parent, parent_budget, scopes, PAIRS)[0] for _ in range(n)]

    ctx = multiprocessing.get_context("spawn")  # no inherited sockets
    barrier, done = ctx.Barrier(n + 1, timeout=TIMEOUT), ctx.Queue()
    procs = [
        ctx.Process(target=drive, args=(url, job_id, chain, scopes, barrier, done), daemon=True) for chain in chains
    ]
    try:
        for p in procs:
            p.start()
        barrier.wait()
        start = time.perf_counter()
        errors = [done.get(timeout=TIMEOUT) for _ in procs]
        elapsed = time.perf_counter() - start
    finally:
        for p in procs:
            p.terminate()
            p.join()
    if any(errors):
        raise RuntimeError(next(e for e in errors if e))
    snap = ledger.snapshot(job_id)
    if (snap.cycles_used, snap.tokens_used, snap.tokens_reserved) != (n * PAIRS, n * PAIRS * SPEND, 0):
        raise RuntimeError(
            f"the ledger counted {snap.cycles_used} calls, {snap.tokens_used} tokens used, "
            f"{snap.tokens_reserved} reserved"
        )
    return n * PAIRS / elapsed


# --- a replica to wait for ---


class Replica(RedisServer):
    """A private redis-server replicating ``master``, in sync before it is used."""

    def __init__(self, master: RedisServer) -> None:
        super().__init__()
        self.master = master

    def persistence(self) -> list[str]:
        return [*super().persistence(), "--replicaof", "127.0.0.1", str(self.master.port)]

    def in_sync(self) -> None:
        client = redis.Redis(port=self.port, decode_responses=True)
        deadline = time.monotonic() + TIMEOUT
        while client.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica on port {self.port} did not sync within {TIMEOUT:g}s")
            time.sleep(0.05)
        client.close()


def replicated(stack: ExitStack) -> tuple[RedisServer, redis.Redis]:
    """A second private redis-server with a replica of its own, both stopped as ``stack`` unwinds."""
    server, client = private_redis(stack)
    replica = Replica(server)
    stack.callback(replica.stop)
    start_redis(replica)
    replica.in_sync()
    return server, client


def wait_cost(stack: ExitStack) -> dict[str, float]:
    """Median µs of a pair on a replicated Redis without and with ``WAIT``, from one
    client, the two alternating pair by pair (which goes first alternating too)."""
    primary, client = replicated(stack)
    plain = RedisLedger(client, keys.DEFAULT_JOB_TTL_SECONDS)
    waiting = RedisLedger(client, keys.DEFAULT_JOB_TTL_SECONDS, replicas=ReplicaWait(REPLICAS, TIMEOUT))
    pairs = ROUNDS * PAIRS
    budget = Budget(max_tokens=10**12, max_cycles=10**7, max_agents=100, max_depth=1)
    job_id, scopes = open_root(plain, budget)
    agents = [
        (ledger, open_child(plain, job_id, [ROOT_AGENT_ID], budget, scopes, pairs + 1)[0], [])
        for ledger in (plain, waiting)
    ]
    for cycle in range(1, pairs + 1):
        for ledger, chain, took in agents if cycle % 2 else agents[::-1]:
            start = time.perf_counter()
            if not spend(ledger, job_id, chain, scopes, cycle, RESERVE, FLOOR, SPEND):
                raise RuntimeError(f"{chain[-1]} was refused call {cycle}")
            took.append(time.perf_counter() - start)
    (_, _, without), (_, _, with_wait) = agents
    print(f"timed {pairs:,} pairs each without and with WAIT", file=sys.stderr)
    return {
        "wait_pairs": pairs,
        "pair_us_replicated": round(1e6 * statistics.median(without), 1),
        "pair_us_wait": round(1e6 * statistics.median(with_wait), 1),
    }


# --- the race for the last tokens ---


def race(url: str, racer: Callable[[redis.Redis, int], Callable[[], None]]) -> None:
    """``RACERS`` threads, each on its own open connection, released at once.

    ``racer(client, i)`` is called before the barrier, so that what it sets up
    (a ``RedisLedger``) is not part of the race; the call it returns races.
    """
    clients = [redis.Redis.from_url(url) for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS, timeout=TIMEOUT)

    def run(i: int) -> None:
        clients[i].ping()
        charge = racer(clients[i], i)
        barrier.wait()
        charge()

    pool = ThreadPoolExecutor(RACERS)
    try:
        list(pool.map(run, range(RACERS)))
    finally:
        barrier.abort()  # a no-op once all passed it; else no thread waits for racers that never started
        pool.shutdown()
        for client in clients:
            client.close()


def naive_overspend(client: redis.Redis, url: str) -> int:
    """Tokens charged past the cap by a counter that reads, compares, then increments."""
    key = f"bench:naive:{uuid.uuid4()}"
    client.set(key, CAP - LEFT)

    def racer(racing: redis.Redis, _: int) -> Callable[[], None]:
        def charge() -> None:
            if int(racing.get(key)) + ASK <= CAP:
                racing.incrby(key, ASK)

        return charge

    race(url, racer)
    return max(0, int(client.get(key)) - CAP)


def covey_overspend(ledger: RedisLedger, url: str) -> int:
    """Tokens charged past the cap when each racer is an agent reserving through ``RedisLedger``."""
    budget = Budget(max_tokens=CAP, max_cycles=10 * RACERS, max_agents=RACERS, max_depth=1)
    job_id, scopes = open_root(ledger, budget)
    spend(ledger, job_id, [ROOT_AGENT_ID], scopes, 1, CAP - LEFT, CAP - LEFT, CAP - LEFT)
    chains = [open_child(ledger, job_id, [ROOT_AGENT_ID], budget, scopes, 1)[0] for _ in range(RACERS)]

    def racer(racing: redis.Redis, i: int) -> Callable[[], None]:
        agent = RedisLedger(racing, keys.DEFAULT_JOB_TTL_SECONDS)
        return lambda: spend(agent, job_id, chains[i], scopes, 1, ASK, ASK, ASK)

    race(url, racer)
    snap = ledger.snapshot(job_id)
    if snap.tokens_reserved or snap.tokens_used < CAP:  # no overspend by granting too little is no win
        raise RuntimeError(f"after the race {snap.tokens_used} tokens were used, {snap.tokens_reserved} reserved")
    return max(0, snap.tokens_used - CAP)


# --- running and reporting ---


def run_all() -> dict:
    with ExitStack() as stack:
        server, client = private_redis(stack)
        ledger = RedisLedger(client, keys.DEFAULT_JOB_TTL_SECONDS)
        rates: dict[int, list[float]] = {n: [] for n in PROCESSES}
        redis_cpu = 0.0  # the server's CPU over the measured rounds: what a pair costs Redis itself
        for round_ in range(ROUNDS + 1):  # round 0 warms up
            for n in PROCESSES:
                cpu = cpu_seconds(server.proc.pid)
                rate = pairs_per_second(ledger, server.url, n)
                if round_:
                    rates[n].append(rate)
                    redis_cpu += cpu_seconds(server.proc.pid) - cpu
            print(f"throughput round {round_}/{ROUNDS}", file=sys.stderr)
        waits = wait_cost(stack) if ReplicaWait is not None else {}

        overspends: dict[str, list[int]] = {"naive": [], "covey": []}
        for _ in range(TRIALS):
            overspends["naive"].append(naive_overspend(client, server.url))
            overspends["covey"].append(covey_overspend(ledger, server.url))
        print(f"raced {TRIALS} trials", file=sys.stderr)

    figures = {
        "pairs_per_process": PAIRS,
        "rounds": ROUNDS,
        "racers": RACERS,
        "trials": TRIALS,
        "cap": CAP,
        "left": LEFT,
        "ask": ASK,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
    }
    figures.update({f"pairs_per_s_{n}": round(statistics.median(r)) for n, r in rates.items()})
    figures["redis_cpu_us_per_pair"] = round(1e6 * redis_cpu / (ROUNDS * PAIRS * sum(PROCESSES)), 1)
    figures.update(waits)
    for name, values in overspends.items():
        figures.update({f"{name}_overspend_max": max(values), f"{name}_overspend_total": sum(values)})
    return figures


def table(after: dict, before: dict | None) -> str:
    if before is None:
        lines = ["| measure | value |", "|---|---:|"]
        lines += [f"| {label} | {after[key]:,} |" for key, label in FIGURES]
        return "\n".join(lines)
    lines = ["| measure | before | after | after / before |", "|---|---:|---:|---:|"]
    for key, label in FIGURES:
        old, new = before.get(key), after[key]
        ratio = f"{new / old:.2f}×" if old else "—"
        lines.append(f"| {label} | {'—' if old is None else f'{old:,}'} | {new:,} | {ratio} |")
    return "\n".join(lines)


def wait_table(figures: dict) -> str:
    """What a pair costs Redis, and what waiting for a replica adds to it (no WAIT
    figures for a covey without it)."""
    cpu = figures["redis_cpu_us_per_pair"]
    lines = [
        f"redis-server's own CPU per pair (over every measured round): {cpu:,} µs, so one Redis "
        f"core runs at most about {1e6 / cpu:,.0f} pairs/s.",
    ]
    if "pair_us_wait" in figures:
        plain, waiting = figures["pair_us_replicated"], figures["pair_us_wait"]
        lines += [
            "",
            f"| one client, a local replica | µs per pair (median of {figures['wait_pairs']:,}) | pairs/s |",
            "|---|---:|---:|",
            f"| no wait (COVEY_LEDGER_REPLICAS=0) | {plain:,.0f} | {1e6 / plain:,.0f} |",
            f"| WAIT {REPLICAS} (COVEY_LEDGER_REPLICAS={REPLICAS}) | {waiting:,.0f} | {1e6 / waiting:,.0f} |",
            f"| WAIT's cost per pair | {waiting - plain:+,.0f} ({waiting / plain:.2f}×) | |",
        ]
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    """The ledger's section of BENCHMARKS.md; with ``before`` (the same JSON from an older commit), side by side."""
    return f"""## Ledger (`bench/ledger.py`)

Every model call of every agent goes through the ledger twice: a reserve before
it (one Lua script checking and holding tokens and a cycle on the agent, each
ancestor and each global scope) and a settle after. The first two rows are how
many such pairs one Redis sustains, from 1 process and from 8 at once, each its
own client driving an agent at depth 2 of a job ({after["pairs_per_process"]:,}
pairs per process; medians of {after["rounds"]} interleaved rounds after a
warm-up, on {after["cores"]} cores and Python {after["python"]}; pairs/s depend on
the machine). The rest is why the check sits in a script: in each of
{after["trials"]} trials, {after["racers"]} threads released by one barrier ask for
{after["ask"]:,} tokens each when {after["left"]:,} are left under a cap. A
check-then-charge counter (GET, compare, INCRBY) lets through more than fit;
covey's reserve must charge nothing past the cap.

Command (from the repo root; it starts its own redis-server):

```
{COMMAND}
```

{table(after, before)}

Under Sentinel the ledger waits for a replica to hold each write before it
counts (`WAIT`, sent in the same round trip as the script; see docs/operate.md).
Its cost, on a second private redis-server with a replica of its own on this
machine (the replica shares its 2 cores): one client's pairs, alternately without
waiting and with `COVEY_LEDGER_REPLICAS={REPLICAS}`, pair by pair. A replica across
a network adds its round trip to each write:

{wait_table(after)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args()
    report(lambda logs: run_all(), lambda figures: f"{table(figures, None)}\n\n{wait_table(figures)}", args.json)


if __name__ == "__main__":
    interruptible(main)
