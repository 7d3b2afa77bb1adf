"""What Redis keeps for each finished agent, and for how long.

Run from the repo root: ``python bench/memory.py [--jobs N] [--json PATH]``.

A finished job's keys stay in Redis until they expire, so the bytes an agent
leaves behind, times the agents run in that span, is the Redis a deployment
needs. Trees of ``[sim:spawn width=W depth=D]`` run on a real ``covey worker``
subprocess. Every key is read (``MEMORY USAGE``, ``TTL``) before and after the
measured jobs, after one warm-up job that creates what exists once per
deployment (kombu's bindings, loaded scripts), and grouped into families: the
shapes of ``covey.keys`` and Celery's and kombu's keys with their ids starred.
The growth of each family, divided by the agents that finished, is what a
finished agent costs. Keys are read, not assumed, so the figures follow the
Celery configuration and retention of the tree measured. A private
redis-server and the worker are started here and stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/memory.py` puts bench/, not the root, on the path

import redis

from bench.harness import RedisServer, Worker, interruptible, report, start_redis
from covey import keys
from covey.client import Client
from covey.config.settings import Settings

WIDTH, DEPTH = 10, 2
QUEUE = "bench-memory"
JOB_TIMEOUT = 120.0
COMMAND = "python bench/memory.py"
INFO_FIGURES = ("used_memory", "used_memory_dataset")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def agents(width: int, depth: int) -> int:
    return sum(width**level for level in range(depth + 1))


def _covey_shapes() -> list[tuple[str, re.Pattern[str]]]:
    """Every key shape of ``covey.keys`` (its public functions that return a ``str``,
    each argument a ``*``), most literal first, so ``covey:scope:*:window:*`` wins
    over ``covey:scope:*``."""
    shapes = []
    for name, shape in inspect.getmembers(keys, inspect.isfunction):
        if name.startswith("_") or shape.__module__ != keys.__name__ or shape.__annotations__.get("return") != "str":
            continue
        glob = shape(*["*"] * len(inspect.signature(shape).parameters))
        shapes.append((glob, re.compile(".+".join(map(re.escape, glob.split("*"))))))
    return sorted(shapes, key=lambda s: len(s[0]) - s[0].count("*"), reverse=True)


SHAPES = _covey_shapes()


def family(key: str) -> str:
    """A covey key's shape; any other key (Celery's, kombu's) with its task ids starred."""
    for glob, pattern in SHAPES:
        if pattern.fullmatch(key):
            return glob
    return UUID.sub("*", key)


# --- running jobs and reading Redis ---


def run_job(client: Client) -> None:
    # Caps far above the tree's needs, so the ledger accounts for every agent and refuses none.
    budget = {"max_tokens": 10_000_000, "max_cycles": 10_000, "max_agents": 10_000, "max_depth": DEPTH}
    spec = client.spec(f"[sim:spawn width={WIDTH} depth={DEPTH}] memory", budget=budget)
    result = client.submit(spec).result(timeout=JOB_TIMEOUT)
    if (result.status.value, result.output, result.usage.agents) != (
        "completed",
        f"leaves={WIDTH**DEPTH}",
        agents(WIDTH, DEPTH) - 1,
    ):
        raise RuntimeError(
            f"job answered {result.status.value} {result.output!r} {result.error or ''} "
            f"with {result.usage.agents} sub-agents"
        )


def settle(r: redis.Redis, seconds: float = 30) -> None:
    """Wait until every task is acknowledged (kombu's ``unacked`` hash is gone): the
    client has the root's result a moment before the worker is done with it."""
    deadline = time.monotonic() + seconds
    while r.exists("unacked", QUEUE):
        if time.monotonic() > deadline:
            raise RuntimeError(f"tasks still unacknowledged or queued after {seconds}s")
        time.sleep(0.05)


def snapshot(r: redis.Redis) -> tuple[dict[str, dict], dict[str, int]]:
    """Per family: keys, bytes, the longest TTL, keys and bytes without a TTL; and
    INFO's used_memory, and used_memory_dataset, which leaves out the clients' buffers."""
    info = r.info("memory")
    names = list(r.scan_iter(count=1000))
    pipe = r.pipeline(transaction=False)
    for name in names:
        pipe.memory_usage(name, samples=0)  # every element, not a sample: hashes of 100+ fields
        pipe.ttl(name)
    read = pipe.execute()
    families: dict[str, dict] = {}
    for name, size, ttl in zip(names, read[::2], read[1::2]):
        if size is None:  # expired between SCAN and MEMORY USAGE
            continue
        f = families.setdefault(
            family(name.decode(errors="backslashreplace")),
            {"keys": 0, "bytes": 0, "max_ttl": None, "no_ttl": 0, "no_ttl_bytes": 0},
        )
        f["keys"] += 1
        f["bytes"] += size
        if ttl == -1:
            f["no_ttl"] += 1
            f["no_ttl_bytes"] += size
        elif ttl >= 0:
            f["max_ttl"] = max(f["max_ttl"] or 0, ttl)
    return families, {name: info[name] for name in INFO_FIGURES}


def growth(before: dict[str, dict], after: dict[str, dict], jobs: int) -> dict[str, dict]:
    """The families that grew with the jobs, per job and per finished agent. A family
    whose keys without a TTL grew (``leak``) keeps what every job adds, whatever the retention."""
    finished = jobs * agents(WIDTH, DEPTH)
    families = {}
    for name, a in after.items():
        b = before.get(name, {"keys": 0, "bytes": 0, "no_ttl": 0, "no_ttl_bytes": 0})
        if a["bytes"] <= b["bytes"]:
            continue
        families[name] = {
            "keys_per_job": (a["keys"] - b["keys"]) / jobs,
            "bytes_per_agent": (a["bytes"] - b["bytes"]) / finished,
            "max_ttl": a["max_ttl"],
            "no_ttl_per_job": (a["no_ttl"] - b["no_ttl"]) / jobs,
            "leak": a["no_ttl"] > b["no_ttl"] or a["no_ttl_bytes"] > b["no_ttl_bytes"],
        }
    return families


def measure(jobs: int, logs: Path) -> dict:
    """A snapshot after a warm-up job and after ``jobs`` more, and their difference;
    whatever it starts is stopped before it returns or raises."""
    with ExitStack() as stack:
        server = RedisServer()
        stack.callback(server.stop)
        start_redis(server)
        name = "memory@bench"
        worker = Worker(
            name,
            [
                sys.executable,
                "-m",
                "covey",
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                "8",
                "--loglevel",
                "warning",
                "--hostname",
                name,
            ],
            server.url,
            QUEUE,
            logs,
        )
        stack.callback(worker.stop)
        client = Client(Settings(redis_url=server.url, queue=QUEUE))
        stack.callback(client.close)
        r = redis.Redis.from_url(server.url)
        stack.callback(r.close)
        worker.wait_ready(client.app)

        run_job(client)
        settle(r)
        before, info_before = snapshot(r)
        for _ in range(jobs):
            run_job(client)
        settle(r)
        after, info_after = snapshot(r)

    finished = jobs * agents(WIDTH, DEPTH)
    families = growth(before, after, jobs)
    ttls = [f["max_ttl"] for f in families.values() if f["max_ttl"] is not None]
    return {
        "width": WIDTH,
        "depth": DEPTH,
        "jobs": jobs,
        "finished_agents": finished,
        "bytes_per_agent": sum(f["bytes_per_agent"] for f in families.values()),
        **{f"{name}_per_agent": (info_after[name] - info_before[name]) / finished for name in INFO_FIGURES},
        "longest_ttl": max(ttls, default=None),
        "leaks": sorted(name for name, f in families.items() if f["leak"]),
        "families": families,
    }


# --- reporting ---


def span(seconds: int | None) -> str:
    if seconds is None:
        return "none"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds} s"


def _by_size(*runs: dict) -> list[str]:
    """The families of all the runs, the largest first."""
    names = {name for run in runs for name in run["families"]}
    return sorted(
        names, key=lambda n: max(run["families"].get(n, {}).get("bytes_per_agent", 0) for run in runs), reverse=True
    )


def table(after: dict) -> str:
    total = after["bytes_per_agent"]
    lines = [
        "| key family | keys per job | bytes per agent | share | longest TTL | keys without TTL per job |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in _by_size(after):
        f = after["families"][name]
        lines.append(
            f"| `{name}` | {f['keys_per_job']:.0f} | {f['bytes_per_agent']:.0f} "
            f"| {f['bytes_per_agent'] / total:.0%} | {span(f['max_ttl'])} | {f['no_ttl_per_job']:.0f} |"
        )
    per_job = [sum(f[k] for f in after["families"].values()) for k in ("keys_per_job", "no_ttl_per_job")]
    lines.append(
        f"| **all keys** | {per_job[0]:.0f} | **{total:.0f}** | 100% | {span(after['longest_ttl'])} "
        f"| {per_job[1]:.0f} |"
    )
    lines += [f"| INFO `{name}` growth | | {after[f'{name}_per_agent']:.0f} | | | |" for name in INFO_FIGURES]
    return "\n".join(lines)


def compare(after: dict, before: dict) -> str:
    def ratio(new: float, old: float) -> str:
        return f"{new / old:.2f}×" if old > 0 else "—"

    lines = [
        "| key family | before: bytes per agent | after: bytes per agent | after / before "
        "| before: longest TTL | after: longest TTL |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in _by_size(before, after):
        b, a = before["families"].get(name), after["families"].get(name)
        old, new = (b["bytes_per_agent"] if b else 0), (a["bytes_per_agent"] if a else 0)
        lines.append(
            f"| `{name}` | {old:.0f} | {new:.0f} | {ratio(new, old)} "
            f"| {span(b['max_ttl']) if b else '—'} | {span(a['max_ttl']) if a else '—'} |"
        )
    lines.append(
        f"| **all keys** | {before['bytes_per_agent']:.0f} | **{after['bytes_per_agent']:.0f}** "
        f"| {ratio(after['bytes_per_agent'], before['bytes_per_agent'])} "
        f"| {span(before['longest_ttl'])} | {span(after['longest_ttl'])} |"
    )
    for name in INFO_FIGURES:
        old, new = before[f"{name}_per_agent"], after[f"{name}_per_agent"]
        lines.append(f"| INFO `{name}` growth | {old:.0f} | {new:.0f} | {ratio(new, old)} | | |")
    return "\n".join(lines)


def section(after: dict, before: dict | None) -> str:
    """The BENCHMARKS.md section: ``after`` alone, or beside ``before`` (the same figures from an older commit)."""
    leaks = ", ".join(f"`{n}`" for n in after["leaks"])
    about = textwrap.fill(
        "A finished job's keys stay in Redis until they expire, so what a finished agent leaves there, "
        "times the agents that finish within the longest TTL, is the memory a deployment's Redis needs. "
        f"{after['jobs']} jobs of {after['finished_agents'] // after['jobs']} agents each "
        f"(`[sim:spawn width={after['width']} depth={after['depth']}]` on a real `covey worker`) run after "
        "a warm-up job; every key is read with `MEMORY USAGE` and `TTL` before and after them, grouped by "
        "shape (`covey.keys`, Celery's and kombu's keys with their ids starred), and each family's growth "
        "is divided by the agents that finished. Redis's own counts (`INFO memory`) check the keys' sum: "
        "`used_memory` also counts the clients' buffers, which move with the worker's connections, and "
        "`used_memory_dataset` leaves them out. The longest TTL is how long a finished job's keys stay; "
        + (
            f"the keys of {leaks} grow with every job and never expire: a leak."
            if leaks
            else "every key that grows with the jobs expires."
        ),
        width=80,
        break_on_hyphens=False,
        break_long_words=False,
    )
    return f"""## Redis memory per finished agent (`bench/memory.py`)

{about}

Command (from the repo root; it starts its own redis-server and worker):

```
{COMMAND}
```

{compare(after, before) if before else table(after)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3, help="measured jobs, after one warm-up")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the figures to PATH as a JSON object")
    args = parser.parse_args()
    report(lambda logs: measure(args.jobs, logs), table, args.json)


if __name__ == "__main__":
    interruptible(main)
