"""Samples from a JSONL or CSV file: ``id``, ``input``, ``target``, optional ``metadata``.

The whole file is validated before anything runs, so a bad line stops the sweep
before its first job. Errors name the file, the line and the field.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from covey import inputs
from covey.errors import describe
from covey.spec import require_text
from covey.sweeps.errors import SweepInputError


class Sample(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    input: str = Field(min_length=1)
    target: Any = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        """Numeric ids are common in datasets; keep them, as text."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("input")
    @classmethod
    def _has_text(cls, value: str) -> str:
        return require_text(value)


def load_dataset(path: str | Path) -> list[Sample]:
    """Every sample of ``path`` (``.jsonl``/``.json`` lines or ``.csv``), or
    ``SweepInputError`` naming the first bad line; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise SweepInputError(f"dataset {path}: no such file")
    rows = _csv_rows(path) if path.suffix.lower() == ".csv" else _jsonl_rows(path)
    samples: list[Sample] = []
    first_line: dict[str, int] = {}
    for line, row in rows:
        try:
            sample = Sample.model_validate(row)
        except ValidationError as e:
            raise SweepInputError(f"{path.name} line {line}: {describe(e)}") from None
        if sample.id in first_line:
            raise SweepInputError(
                f"{path.name} line {line}: id: {sample.id!r} repeats the id of line {first_line[sample.id]}"
            )
        first_line[sample.id] = line
        samples.append(sample)
    if not samples:
        raise SweepInputError(f"dataset {path.name}: no samples")
    return samples


def digest(samples: list[Sample]) -> str:
    """A fingerprint of the samples' content, whatever file or order of keys held them."""
    body = json.dumps([s.model_dump(mode="json") for s in samples], sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's lines, each at most ``inputs.MAX_LINE_BYTES`` and UTF-8, else one line saying which is not."""
    try:
        yield from inputs.lines(path, path.name, inputs.MAX_LINE_BYTES)
    except inputs.Unreadable as e:
        raise SweepInputError(str(e)) from None


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    for line, text in _lines(path):
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            raise SweepInputError(f"{path.name} line {line}: not valid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(row, dict):
            raise SweepInputError(f"{path.name} line {line}: expected a JSON object with id, input, target")
        yield line, row


def _csv_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """CSV rows; a ``metadata`` column holds JSON, every other extra column goes into metadata."""
    reader = csv.DictReader(text for _, text in _lines(path))
    missing = [c for c in ("id", "input", "target") if c not in (reader.fieldnames or [])]
    if missing:
        raise SweepInputError(f"{path.name} line 1: header lacks column {missing[0]!r} (needs id, input, target)")
    for row in reader:
        line = reader.line_num
        if None in row:
            raise SweepInputError(f"{path.name} line {line}: more cells than header columns")
        if not row["target"]:  # a short row's missing cells read None, an empty cell ""
            raise SweepInputError(f"{path.name} line {line}: target: missing (every CSV row needs one)")
        metadata: dict[str, Any] = {}
        if row.get("metadata"):
            try:
                metadata = json.loads(row["metadata"])
            except json.JSONDecodeError as e:
                raise SweepInputError(f"{path.name} line {line}: metadata: not valid JSON: {e.msg}") from None
        extra = {k: v for k, v in row.items() if k not in ("id", "input", "target", "metadata")}
        base = {k: row[k] for k in ("id", "input", "target") if k in row}
        yield line, {**base, "metadata": {**extra, **metadata} if isinstance(metadata, dict) else metadata}
