"""``DIR/sweep.json``: the sweep's identity, kept so a rerun is the same sweep.

The id names the ledger scope ``sweep:<id>`` and the claims of every unit; a rerun
with the same DIR reads it back and so charges the same scope and finds the same
claims. Its total caps are kept too: a rerun that gives none keeps them.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from covey.budgets import scopes

MANIFEST_FILE = "sweep.json"


class Manifest(BaseModel):
    id: str = Field(pattern=scopes.LABEL_PATTERN)
    created: datetime
    dataset: str
    grid: str
    max_tokens_total: int | None = None
    max_cycles_total: int | None = None

    @property
    def scope(self) -> str:
        return scopes.sweep(self.id)

    @classmethod
    def open(
        cls, directory: Path, dataset: str, grid: str, max_tokens_total: int | None, max_cycles_total: int | None
    ) -> Manifest:
        """The directory's manifest, created on a first run; caps given now replace the kept ones."""
        path = Path(directory) / MANIFEST_FILE
        if path.exists():
            try:
                found = cls.model_validate_json(path.read_text(encoding="utf-8"))
            except ValidationError as e:
                raise ValueError(f"{path}: not a covey sweep manifest ({e.error_count()} errors)") from None
        else:
            found = cls(id=uuid.uuid4().hex[:12], created=datetime.now(UTC), dataset=dataset, grid=grid)
        update = {
            k: v
            for k, v in (("max_tokens_total", max_tokens_total), ("max_cycles_total", max_cycles_total))
            if v is not None
        }
        manifest = found.model_copy(update={"dataset": dataset, "grid": grid, **update})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return manifest
