"""A priority-9 job sent behind a backlog: how many of the backlog start before it.

Run from the repo root: ``python bench/priority.py [--backlog N] [--json PATH]``.

One ``covey worker --pool threads --concurrency 8`` process runs; every model
call of the ``sim`` model takes 20 ms. A round sends ``--backlog`` one-call jobs
(``single`` strategy) in one batch, then one tree (a root, two children, the
root's resume) while the worker is draining them: at priority 9, or at the
default as the baseline. Each round reports how many of the backlog had started
when the tree was sent, when its root started and when it ended (its children
and resume went at its priority too): the backlog's starts are read from their
roots' records. The rounds run on Redis as the broker, then on RabbitMQ at
127.0.0.1:5672 (guest) on a queue of the round's own, deleted afterwards, when
one answers there. A private redis-server and the worker are started here and
stopped on exit, Ctrl-C or error.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `python bench/priority.py` puts bench/, not the root, on the path

from kombu import Connection

from bench.harness import RedisServer, Worker, interruptible, report, start_redis
from covey import keys
from covey.client import Client
from covey.config.settings import Settings
from covey.context import ROOT_AGENT_ID
from covey.store.tree import Node, unpack

SLOTS = 8
LATENCY_MS = 20
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672//"
RABBITMQ_SHOWN = "127.0.0.1:5672"
TREE = "[sim:spawn width=2 depth=1] the urgent one"
POLL_SECONDS = 0.2


def _roots(client: Client, job_ids: list[str]) -> list[Node | None]:
    """The jobs' root nodes, in one round trip (None: not started)."""
    with client.redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(keys.nodes(job_id), ROOT_AGENT_ID)
        raw = pipe.execute()
    return [None if r is None else unpack(ROOT_AGENT_ID, r) for r in raw]


def _round(client: Client, backlog: int, priority: int | None) -> dict:
    """The backlog, then the tree at ``priority`` (None: the default), run to the end."""
    jobs = [(str(uuid.uuid4()), client.spec(f"What is {i} + 1?", strategy="single")) for i in range(backlog)]
    client.send(jobs, subscribe=False)
    sent = datetime.now().astimezone()
    asked = {} if priority is None else {"priority": priority}
    tree = client.submit(client.spec(TREE, budget={"max_depth": 1}, **asked), subscribe=False)
    ids = [job_id for job_id, _ in jobs]
    while not all(node is not None and node.final for node in _roots(client, [*ids, tree.id])):
        time.sleep(POLL_SECONDS)
    starts = [node.started_at for node in _roots(client, ids) if node is not None and node.started_at]
    root = _roots(client, [tree.id])[0]
    assert root is not None and root.started_at and root.finished_at and len(starts) == backlog

    def before(moment: datetime) -> int:
        return sum(start < moment for start in starts)

    return {
        "priority": priority,
        "started_when_sent": before(sent),
        "started_before_it": before(root.started_at),
        "started_before_its_end": before(root.finished_at),
        "agents": len(tree.tree()),
    }


def _broker(logs: Path, server: RedisServer, backlog: int, name: str, broker: str | None) -> dict:
    """A worker on ``broker`` (None: the Redis), and the two rounds on it."""
    queue = f"covey-priority-{uuid.uuid4().hex[:8]}" if broker else "covey"
    extra = {"COVEY_SIM_LATENCY_MS": str(LATENCY_MS), **({"COVEY_BROKER_URL": broker} if broker else {})}
    with ExitStack() as stack:
        if broker:
            stack.callback(_delete_queue, broker, queue)
        client = Client(Settings(redis_url=server.url, broker_url=broker, queue=queue))
        stack.callback(client.close)
        worker = Worker(
            f"{name}@bench",
            [sys.executable, "-m", "covey", "worker", "--pool", "threads", "--concurrency", str(SLOTS)]
            + ["--processes", "1", "--hostname", f"{name}@bench", "--loglevel", "warning"],
            server.url,
            queue,
            logs,
            env=extra,
        )
        stack.callback(worker.stop)
        worker.wait_ready(client.app)
        return {"broker": name, "rounds": [_round(client, backlog, p) for p in (None, 9)]}


def _delete_queue(broker: str, queue: str) -> None:
    with Connection(broker, connect_timeout=2) as conn:
        conn.default_channel.queue_delete(queue)


def _rabbitmq_answers() -> bool:
    try:
        with Connection(RABBITMQ, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def measure(logs: Path, backlog: int) -> dict:
    with ExitStack() as stack:
        server = RedisServer()
        stack.callback(server.stop)
        start_redis(server)
        brokers = [_broker(logs, server, backlog, "redis", None)]
        if _rabbitmq_answers():
            brokers.append(_broker(logs, server, backlog, "rabbitmq", RABBITMQ))
    return {"backlog": backlog, "slots": SLOTS, "latency_ms": LATENCY_MS, "brokers": brokers}


def section(after: dict, before: dict | None) -> str:
    """``before`` is not shown: before priorities, every job ran at the baseline's."""
    rows = [
        f"| {b['broker']} | {'default (0)' if r['priority'] is None else r['priority']} | {r['started_when_sent']:,} "
        f"| {r['started_before_it']:,} | {r['started_before_its_end']:,} |"
        for b in after["brokers"]
        for r in b["rounds"]
    ]
    alone = f"\nRabbitMQ did not answer at {RABBITMQ_SHOWN} in this run: Redis only.\n"
    missing = "" if len(after["brokers"]) > 1 else alone
    return f"""## A priority job behind a backlog (`bench/priority.py`)

{after["backlog"]:,} one-call jobs are sent in one batch to one `covey worker --pool threads
--concurrency {after["slots"]}` process (every `sim` model call takes {after["latency_ms"]} ms), then, while the
worker drains them, one tree of three agents (a root, two children, the root's resume
after them), at priority 9 or at the default. Each row counts the backlog's jobs
that had started when the tree was sent, when its root started, and when it ended:
its children and its resume go at its priority too. At priority 9 it waits for a
slot to free up (the worker holds as many deliveries as it has slots), not for
the backlog to drain; at the default, behind all of it.
{missing}
```
python bench/priority.py --backlog {after["backlog"]}
```

| broker | the tree's priority | backlog started when it was sent | ... when it started | ... when it ended |
|---|---|---:|---:|---:|
{chr(10).join(rows)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", type=int, default=1000, help="jobs sent ahead of the priority one")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    report(lambda logs: measure(logs, args.backlog), lambda f: section(f, None), args.json)


if __name__ == "__main__":
    interruptible(main)
