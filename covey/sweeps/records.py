"""``DIR/results.jsonl``: one line per finished attempt, appended as results arrive.

The file is the sweep's durable log: a rerun reads it to skip what is done, and
``covey sweep-report`` rebuilds the summary from it alone. A submitter killed
mid-write leaves a torn last line; it is skipped on reading and closed off with
a newline and a marker line before the next append, so one torn line never spoils
the next. Any other line that is no record is refused, naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from covey.errors import describe
from covey.status import AgentStatus, Cause, JobStatus
from covey.sweeps.errors import SweepInputError

RESULTS_FILE = "results.jsonl"
# The line the writer puts after a torn one (a submitter killed mid-write) before its
# next append, so the torn line is known for one and never taken for corruption.
TORN = '{"torn": "the line above was cut short"}'

# A sample's outcome when the sweep's scope ran dry before it could finish.
SKIPPED_BUDGET = "skipped_budget"
# A completed sample whose answer came from its wrap-up, as a summary counts it apart.
WRAPPED_UP = "wrapped_up"
# The worker refused the job (an invalid spec, a model it cannot serve).
REFUSED = JobStatus.REFUSED.value
# Outcomes a rerun keeps; any other status (failed, timed_out, refused,
# skipped_budget) is run again.
KEPT = frozenset({s.value for s in (AgentStatus.COMPLETED, AgentStatus.BUDGET_EXCEEDED, AgentStatus.CANCELLED)})


class RecordUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cycles: int = 0
    agents: int = 0
    cost_usd: float = 0.0  # where the model has prices
    model_retries: int = 0  # the SDK's retries before answered model calls (a failed one's are in its cause)


class Record(BaseModel):
    """One attempt at one unit (a sample x configuration x repeat)."""

    model_config = ConfigDict(extra="ignore")

    unit: str
    sample_id: str
    config: str
    config_key: str
    repeat: int = 0
    attempt: int = 1
    status: str
    output: str | None = None
    target: Any = None
    score: float | None = None  # the primary (first) scorer's
    scores: dict[str, float] = Field(default_factory=dict)  # every scorer's, by name
    score_error: str | None = None
    error: str | None = None
    cause: Cause | None = None  # the job's, when it did not complete or wrapped up
    wrapped_up: bool = False  # completed with a wrap-up answer: its budget ran out first
    usage: RecordUsage = Field(default_factory=RecordUsage)
    judge_tokens: int = 0
    latency: float | None = None  # seconds from submission to the result
    job_id: str | None = None
    judge_job_id: str | None = None
    finished_at: datetime | None = None

    @property
    def kept(self) -> bool:
        return self.status in KEPT


class ResultsLog:
    """Append-only ``results.jsonl`` in a sweep's directory."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / RESULTS_FILE
        self._file: IO[str] | None = None

    def records(self) -> Iterator[Record]:
        """Every record in file order, read a line at a time (a sweep's file is as long
        as the sweep: it is never held whole). A torn line (the last one, or one the
        writer closed off) is skipped; any other line that is no record is refused."""
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as f:
            lines = enumerate(f, start=1)
            ahead = next(lines, None)
            while ahead is not None:
                (number, text), ahead = ahead, next(lines, None)
                cut = not text.endswith("\n")  # only the last line can lack its newline
                text = text.removesuffix("\n")
                if not text or text == TORN:
                    continue
                try:
                    yield Record.model_validate(json.loads(text))
                except (ValueError, ValidationError) as e:
                    torn = cut or (ahead is not None and ahead[1].removesuffix("\n") == TORN)
                    if not torn:
                        why = describe(e) if isinstance(e, ValidationError) else f"not valid JSON: {e}"
                        raise SweepInputError(f"{self.path} line {number}: {why}") from None

    def latest(self) -> dict[str, Record]:
        """Each unit's last record: the one a rerun and the report go by."""
        return {r.unit: r for r in self.records()}

    def append(self, *records: Record) -> None:
        """Write the records' lines, in one write: flushed on return, so on disk for a
        rerun even if this process is killed next."""
        if self._file is None:
            self._file = self._open()
        self._file.write("".join(record.model_dump_json() + "\n" for record in records))
        self._file.flush()

    def _open(self) -> IO[str]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torn = self.path.exists() and _last_byte(self.path) not in (b"", b"\n")
        f = self.path.open("a", encoding="utf-8")
        if torn:
            f.write("\n" + TORN + "\n")
        return f

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _last_byte(path: Path) -> bytes:
    with path.open("rb") as f:
        if f.seek(0, 2) == 0:
            return b""
        f.seek(-1, 2)
        return f.read(1)
