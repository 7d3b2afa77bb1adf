"""``DIR/sweep.json``: the sweep's identity, kept so a rerun is the same sweep.

The id names the ledger scope ``sweep:<id>`` and the claims of every unit; a rerun
with the same DIR reads it back and so charges the same scope and finds the same
claims. Its total caps are kept too: a rerun that gives none keeps them. It
records the grid as it was run (every configuration, its key, the scorers) and a
digest of the dataset and of the grid, so a rerun with another dataset or grid is
refused instead of merging its results into this sweep's.

It records the directory it was written in, too: a copy of DIR run elsewhere
while DIR still holds the sweep would otherwise share (and could reset) its cap
and claims, so it becomes a sweep of its own, with a new id and an unspent cap,
keeping the results it was copied with. A directory moved (nothing left where it
was) is the same sweep.
"""

from __future__ import annotations

import fcntl
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from covey.budgets import scopes
from covey.sweeps.errors import SweepInputError

MANIFEST_FILE = "sweep.json"
LOCK_FILE = ".sweep.lock"  # held while a submitter reads and writes the manifest
TURN_SECONDS = 30


class SweepMismatch(SweepInputError):
    """The directory holds a sweep of another dataset or grid; ``which`` says which."""

    def __init__(self, message: str, which: str) -> None:  # "dataset" or "grid"
        super().__init__(message)
        self.which = which


class Manifest(BaseModel):
    id: str = Field(pattern=scopes.LABEL_PATTERN)
    created: datetime
    dataset: str
    grid: str
    max_tokens_total: int | None = None
    max_cycles_total: int | None = None
    max_cost_total: float | None = None  # USD
    dataset_digest: str | None = None  # None in a manifest older than digests: taken from the next run
    grid_digest: str | None = None
    grid_run: dict[str, Any] | None = None  # the grid as run: configurations with their keys, repeats, scorers
    directory: str | None = None  # resolved; None in a manifest older than it: taken from the next run
    copy_of: str | None = None  # the id of the sweep this one's directory was copied from

    @property
    def scope(self) -> str:
        return scopes.sweep(self.id)

    def original(self, directory: Path) -> Path | None:
        """Where this sweep runs, when ``directory`` is a copy of it: the directory the
        manifest was written in, if that is elsewhere and still holds this sweep."""
        if self.directory is None or Path(self.directory) == Path(directory).resolve():
            return None
        there = Path(self.directory) / MANIFEST_FILE
        try:
            same = Manifest.model_validate_json(there.read_text(encoding="utf-8")).id == self.id
        except (OSError, ValidationError):
            same = False
        return Path(self.directory) if same else None

    @classmethod
    def check(cls, directory: Path, dataset_digest: str | None, grid_digest: str | None) -> Manifest | None:
        """The directory's manifest, if it has one, after making sure its sweep ran this
        dataset and grid (``SweepMismatch`` naming which it did not)."""
        path = Path(directory) / MANIFEST_FILE
        if not path.exists():
            return None
        try:
            found = cls.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as e:
            raise SweepInputError(f"{path}: not a covey sweep manifest ({e.error_count()} errors)") from None
        for which, kept, given, name in (
            ("dataset", found.dataset_digest, dataset_digest, found.dataset),
            ("grid", found.grid_digest, grid_digest, found.grid),
        ):
            if kept is not None and given is not None and kept != given:
                raise SweepMismatch(
                    f"{path.parent} holds sweep {found.id} of another {which} ({name} as it was then): "
                    f"give another --out, or the same {which}",
                    which,
                )
        return found

    @classmethod
    def open(
        cls,
        directory: Path,
        dataset: str,
        grid: str,
        max_tokens_total: int | None,
        max_cycles_total: int | None,
        *,
        max_cost_total: float | None = None,
        dataset_digest: str | None = None,
        grid_digest: str | None = None,
        grid_run: dict[str, Any] | None = None,
    ) -> Manifest:
        """The directory's manifest, created on a first run (or for a copy, ``original``);
        caps given now replace the kept ones. ``SweepMismatch`` when the directory's
        sweep ran another dataset or grid. Submitters on one directory take turns, so
        two first runs make one sweep, not two that each spend a cap of their own."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with _turn(directory / LOCK_FILE):
            path = directory / MANIFEST_FILE
            found = cls.check(directory, dataset_digest, grid_digest)
            if found is None:
                found = cls(id=_new_id(), created=datetime.now(UTC), dataset=dataset, grid=grid)
            elif found.original(directory) is not None:
                found = found.model_copy(update={"id": _new_id(), "created": datetime.now(UTC), "copy_of": found.id})
            given_now = (
                ("max_tokens_total", max_tokens_total),
                ("max_cycles_total", max_cycles_total),
                ("max_cost_total", max_cost_total),
                ("dataset_digest", dataset_digest),
                ("grid_digest", grid_digest),
                ("grid_run", grid_run),
            )
            update = {k: v for k, v in given_now if v is not None}
            here = str(directory.resolve())
            manifest = found.model_copy(update={"dataset": dataset, "grid": grid, "directory": here, **update})
            # Written beside it and moved into place: a reader that takes no turn (a
            # report, the web view) reads the old manifest or the new one, never half of one.
            written = path.with_name(f".{MANIFEST_FILE}.new")
            written.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
            os.replace(written, path)
            return manifest


@contextmanager
def _turn(lock: Path) -> Iterator[None]:
    """An exclusive lock on ``lock`` for the block, waited for at most TURN_SECONDS.
    The holder only reads and writes one small file; a holder that dies lets go."""
    with lock.open("a") as held:
        deadline = time.monotonic() + TURN_SECONDS
        while True:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SweepInputError(
                        f"{lock}: another submitter held it for {TURN_SECONDS}s; is one stuck?"
                    ) from None
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def _new_id() -> str:
    return uuid.uuid4().hex[:12]
