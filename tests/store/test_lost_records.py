"""The job stores written after their job's keys vanished (a Redis wiped): every key
written comes back with the job's TTL, never without one."""

from __future__ import annotations

import uuid

import pytest

from covey import keys
from covey.store.checkpoints import Checkpoints
from covey.store.tree import JobTree, Node
from covey.store.workspace import Workspace

TTL = keys.DEFAULT_JOB_TTL_SECONDS

WRITES = {
    # The root's node first, then a child's once the job's keys are gone.
    "tree": (
        keys.nodes,
        lambda r, job, n: JobTree(r, TTL).record(
            job, Node(agent_id=f"root-sub-{n}", parent_id="root", depth=1, status="running")
        ),
    ),
    "checkpoints": (
        lambda job: keys.checkpoint(job, "root"),
        lambda r, job, n: Checkpoints(r, TTL).save(
            job, "root", n, "{}", node=Node(agent_id="root", depth=0, status="waiting" if n % 2 else "running")
        ),
    ),
    # A node's move writes an event.
    "events": (
        keys.events,
        lambda r, job, n: JobTree(r, TTL).record(
            job, Node(agent_id=f"root-sub-{n}", parent_id="root", depth=1, status="running")
        ),
    ),
    "workspace": (keys.workspace, lambda r, job, n: Workspace(r, job, TTL).write("", f"notes-{n}.md", "hi")),
}


@pytest.mark.parametrize("store", sorted(WRITES))
def test_a_write_after_the_jobs_keys_vanished_comes_back_with_the_jobs_ttl(redis_client, store):
    job = f"job-{uuid.uuid4().hex}"
    key_of, write = WRITES[store]
    JobTree(redis_client, TTL).record(job, Node(agent_id="root", depth=0, status="running"))
    write(redis_client, job, 1)
    redis_client.delete(*redis_client.scan_iter(match=f"{keys.PREFIX}:{{{job}}}:*"))
    write(redis_client, job, 2)
    assert 0 < redis_client.ttl(key_of(job)) <= TTL
