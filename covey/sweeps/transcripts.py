"""A sweep's transcripts: each unit's job, read back by the job id its result names.

They live in Redis only as long as the job's records (``COVEY_JOB_TTL``);
``export`` writes them to ``DIR/transcripts.jsonl``, which outlives Redis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from covey.client import Client
from covey.store.transcripts import Transcript
from covey.store.tree import Node
from covey.sweeps.errors import SweepInputError, UnknownSample
from covey.sweeps.records import Record, ResultsLog

TRANSCRIPTS_FILE = "transcripts.jsonl"


class UnitTranscripts(BaseModel):
    """One unit's latest attempt and every agent of its job with its transcript.
    ``agents`` is empty when the job's records are gone (``expired``) or it had no job."""

    record: Record
    agents: list[tuple[Node, Transcript | None]] = []
    expired: bool = False

    def line(self) -> dict[str, Any]:
        """Its line of ``transcripts.jsonl``."""
        r = self.record
        return {
            "unit": r.unit,
            "sample_id": r.sample_id,
            "config": r.config,
            "repeat": r.repeat,
            "status": r.status,
            "job_id": r.job_id,
            "expired": self.expired,
            "agents": [
                {
                    "agent_id": node.agent_id,
                    "parent_id": node.parent_id,
                    "role": node.role,
                    "status": node.status.value,
                    "transcript": t.model_dump(mode="json") if t is not None else None,
                }
                for node, t in self.agents
            ],
        }


def of_sample(directory: Path, sample_id: str, client: Client) -> list[UnitTranscripts]:
    """The transcripts of every unit of ``sample_id`` (each configuration and repeat);
    ``UnknownSample`` when the sweep has no such sample, ``SweepInputError`` when its
    results hold a line that is no record."""
    records = [r for r in ResultsLog(directory).latest().values() if r.sample_id == sample_id]
    if not records:
        known = sorted({r.sample_id for r in ResultsLog(directory).records()})
        listed = ", ".join(known[:10]) + (", ..." if len(known) > 10 else "")
        raise UnknownSample(f"{directory}: no sample {sample_id!r} in its results (samples: {listed or 'none'})")
    return [of_unit(r, client) for r in records]


def of_unit(record: Record, client: Client) -> UnitTranscripts:
    if record.job_id is None:
        return UnitTranscripts(record=record)
    handle = client.job(record.job_id)
    nodes = handle.tree()
    if not nodes:
        return UnitTranscripts(record=record, expired=True)
    return UnitTranscripts(record=record, agents=[(n, handle.transcript(n.agent_id)) for n in nodes])


def export(directory: Path, client: Client) -> tuple[Path, list[UnitTranscripts]]:
    """Write every unit's transcripts to ``DIR/transcripts.jsonl`` (rewritten whole)."""
    units = [of_unit(r, client) for r in ResultsLog(directory).latest().values()]
    if not units:
        raise SweepInputError(f"{directory}: no results to export (no {ResultsLog(directory).path.name})")
    path = directory / TRANSCRIPTS_FILE
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("w", encoding="utf-8") as f:
        for unit in units:
            f.write(json.dumps(unit.line(), ensure_ascii=False) + "\n")
    partial.replace(path)  # a reader never sees half a file
    return path, units
