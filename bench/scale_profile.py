"""Where the CPU of ``bench/scale.py``'s widest tree goes: Celery's, the SDK's, the sim's, covey's own.

Run from the repo root: ``python bench/scale_profile.py [--config threads] [--trees N]``
(needs ``pip install py-spy``, and leave to trace processes: root, or ptrace allowed).

It starts one configuration of ``bench/scale.py`` (a ``covey worker`` column, or
``raw`` Celery) on a private redis-server, runs the warm-up trees, then runs N
931-agent trees while ``py-spy record --gil`` samples every worker process: on 2
cores each process is bound by its GIL, so what holds it is what the tree waits
for. Each sample goes to the first owner found from its innermost frame outwards:
the sim (``covey.models.sim``, standing in for the provider's network), the
``openai`` SDK with its HTTP client, Celery (``celery``, ``kombu``, ``billiard`` and
covey's kombu transport, which raw Celery runs too), or covey; Redis's client,
json, pydantic and the standard library are no owner, so their time is their
caller's. Covey's share is split again by what its innermost frame is: a Redis
round trip, json, pydantic, or its own code. Beside the shares are the workers'
CPU per agent and, from ``INFO commandstats``, Redis commands per agent (those
inside Lua scripts counted too). Everything it starts is stopped on exit.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/scale_profile.py` puts bench/, not the root, on the path

import redis

from bench import scale
from bench.fanout import agents
from bench.harness import RedisServer, Worker, children, cpu_seconds, interruptible, start_redis
from covey.client import Client
from covey.config.settings import Settings

WIDTH = scale.WIDTHS[-1]
OWNERS = (  # the first of these found from a sample's innermost frame outwards owns it
    ("sim", ("covey/models/sim/",)),
    ("openai SDK", ("openai/", "httpx2/", "httpx/", "httpcore/")),
    ("Celery", ("celery/", "kombu/", "billiard/", "vine/", "covey/config/broker.py", "covey/config/holder.py")),
    ("covey", ("covey/",)),
)
NO_OWNER = ("covey/__main__.py", "covey/cli/", "covey/config/connections.py")  # entry points, the Redis retry wrapper
COVEY_KINDS = (("Redis round trips", "redis/"), ("json", "json/"), ("pydantic", "pydantic"))


def _path(frame: str) -> str:
    """A py-spy frame's file, from its site-packages (or repository) root."""
    found = re.search(r"\(([^)]*?)(?::\d+)?\)$", frame)
    path = found.group(1) if found else ""
    return path.split("site-packages/")[-1].removeprefix(str(ROOT) + "/")


def owner(frames: list[str]) -> str:
    """Who a sample's time is, from its frames (outermost first)."""
    for path in map(_path, reversed(frames)):
        if path.startswith(NO_OWNER):
            continue
        for name, prefixes in OWNERS:
            if path.startswith(prefixes):
                if name != "covey":
                    return name
                leaf = _path(frames[-1])
                kind = next((kind for kind, prefix in COVEY_KINDS if leaf.startswith(prefix)), "its own code")
                return f"covey: {kind}"
    return "other (thread pool, standard library)"


def shares(profiles: list[Path]) -> tuple[dict[str, float], int]:
    """Owner -> its share of every sample of py-spy's raw (collapsed) output files; and how many samples."""
    counts: collections.Counter[str] = collections.Counter()
    for profile in profiles:
        for line in profile.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if stack:
                counts[owner(stack.split(";"))] += int(n)
    total = sum(counts.values())
    return {name: n / total for name, n in counts.most_common()}, total


def start(stack: ExitStack, config: str, redis_url: str, logs: Path) -> tuple[scale.Run, scale.Pids]:
    """The configuration's workers, and a run of a tree on them and their processes."""
    failed: dict[str, str] = {}
    runs: dict[str, scale.Run] = {}
    pids: dict[str, scale.Pids] = {}
    if config == "raw":
        scale.start_raw(stack, redis_url, logs, failed, runs, pids)
    else:
        hostname, queue = f"{config}@profile", f"bench-profile-{config}"
        argv = [sys.executable, "-m", "covey", "worker", *scale.WORKERS[config], "--loglevel", "warning"]
        worker = Worker(hostname, [*argv, "--hostname", hostname], redis_url, queue, logs)
        stack.callback(scale.stop, worker)
        client = Client(Settings(redis_url=redis_url, queue=queue))
        stack.callback(client.close)
        worker.wait_ready(client.app)
        runs[config] = lambda width: scale.run_covey(client, width)
        pids[config] = lambda: children(worker.proc.pid)
    if failed:
        raise RuntimeError(failed[config])
    return runs[config], pids[config]


def profile(config: str, trees: int, logs: Path) -> dict[str, Any]:
    with ExitStack() as stack:
        server = RedisServer()
        stack.callback(server.stop)
        start_redis(server)
        store = redis.Redis.from_url(server.url, decode_responses=True)
        stack.callback(store.close)
        run, pids = start(stack, config, server.url, logs)
        for width in scale.WIDTHS:  # the warm-up: every model and connection made before sampling
            run(width)
        procs = pids()
        outputs = [logs / f"py-spy-{pid}.txt" for pid in procs]
        spies = [
            subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "--gil",
                    "--nonblocking",
                    "-r",
                    "100",
                    "-f",
                    "raw",
                    "-o",
                    str(out),
                    "--pid",
                    str(pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for pid, out in zip(procs, outputs)
        ]
        time.sleep(1)  # attached
        commands = _commands(store)
        cpu = sum(map(cpu_seconds, procs))
        seconds = [run(WIDTH) for _ in range(trees)]
        cpu = sum(map(cpu_seconds, procs)) - cpu
        commands = _commands(store) - commands
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            spy.wait(timeout=60)
        per_agent = trees * agents(WIDTH, scale.DEPTH)
        owners, samples = shares(outputs)
        return {
            "config": config,
            "agents": agents(WIDTH, scale.DEPTH),
            "trees": trees,
            "seconds": seconds,
            "cpu_ms_per_agent": cpu * 1000 / per_agent,
            "redis_commands_per_agent": commands.total() / per_agent,
            "samples": samples,
            "shares": owners,
        }


def _commands(store: redis.Redis) -> collections.Counter[str]:
    return collections.Counter({name: int(row["calls"]) for name, row in store.info("commandstats").items()})


def show(figures: dict[str, Any]) -> str:
    cpu = figures["cpu_ms_per_agent"]
    lines = [
        f"{figures['trees']} trees of {figures['agents']} agents on {scale.LABELS[figures['config']]}: "
        f"{', '.join(f'{s:.1f} s' for s in figures['seconds'])}; worker CPU {cpu:.2f} ms per agent, "
        f"{figures['redis_commands_per_agent']:.1f} Redis commands per agent\n",
        f"| owner | share of {figures['samples']} GIL samples | ms of CPU per agent |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {share:.0%} | {share * cpu:.2f} |" for name, share in figures["shares"].items()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=[*scale.WORKERS, "raw"], default="threads")
    parser.add_argument("--trees", type=int, default=4, help=f"{agents(WIDTH, scale.DEPTH)}-agent trees sampled")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep py-spy's raw profiles and the logs in DIR")
    args = parser.parse_args()
    if shutil.which("py-spy") is None:
        sys.exit("py-spy is not installed: pip install py-spy")
    logs = args.keep or Path(tempfile.mkdtemp(prefix="covey-profile-"))
    logs.mkdir(parents=True, exist_ok=True)
    try:
        print(show(profile(args.config, args.trees, logs)))
    finally:
        if not args.keep:
            shutil.rmtree(logs)


if __name__ == "__main__":
    interruptible(main)
