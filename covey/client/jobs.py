"""Seeing the jobs sent, and sending one again: what ``covey jobs`` and ``covey retry`` read.

Both read the index of submitted jobs (``covey.store.jobs``), so they know the jobs
covey clients sent while their records live (the job TTL), newest first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel

from covey.client.errors import UnknownJob
from covey.spec import JobSpec
from covey.status import JobStatus
from covey.store.tree import preview

if TYPE_CHECKING:
    from covey.client import Client


class JobEntry(BaseModel):
    """One row of ``covey jobs``."""

    job_id: str
    status: JobStatus
    submitted_at: datetime
    tenant: str | None
    sweep: str | None
    strategy: str
    model: str | None  # None: the worker's default (COVEY_MODEL)
    task: str  # its first line, cut


def jobs(client: Client, statuses: set[JobStatus], tenant: str | None, limit: int) -> list[JobEntry]:
    """Newest first, until ``limit`` match; each job's status read as ``covey status`` reads it."""
    found: list[JobEntry] = []
    seen: set[str] = set()
    for job_id in client.index.newest():
        if len(found) >= limit:
            break
        if job_id in seen:  # jobs submitted while reading shift the pages
            continue
        seen.add(job_id)
        submission = client.index.submission(job_id)
        if submission is None:  # expired since the index was trimmed
            continue
        spec = submission.spec
        if tenant is not None and spec.get("tenant") != tenant:
            continue
        status = client.job(job_id).status()
        if statuses and status not in statuses:
            continue
        found.append(
            JobEntry(
                job_id=job_id,
                status=status,
                submitted_at=datetime.fromtimestamp(submission.at, UTC),
                tenant=spec.get("tenant"),
                sweep=spec.get("sweep"),
                strategy=spec.get("strategy", "react"),
                model=spec.get("model"),
                task=preview(str(spec.get("task", ""))),
            )
        )
    return found


def again(client: Client, job_id: str) -> JobSpec:
    """The spec ``job_id`` was sent with, its deadline as far from now as it was from
    its first submit (a ``--timeout`` gives the new job the same time)."""
    submission = client.index.submission(job_id)
    if submission is None:
        raise UnknownJob(job_id)
    spec = JobSpec.parse(submission.spec)
    deadline = spec.budget.deadline
    if deadline is None:
        return spec
    moved = deadline + (datetime.now(UTC) - datetime.fromtimestamp(submission.at, UTC))
    return spec.model_copy(update={"budget": spec.budget.model_copy(update={"deadline": moved})})
