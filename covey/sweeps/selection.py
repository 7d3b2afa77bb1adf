"""Which samples of a dataset a run takes: some ids, a seeded shuffle, the first N.

A selection narrows a run, not the sweep: its results join the same
``results.jsonl``, so a first run on ``limit=20`` and a later full run share the
samples both ran.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from covey.sweeps.dataset import Sample
from covey.sweeps.errors import SweepInputError


@dataclass(frozen=True)
class Selection:
    sample_ids: tuple[str, ...] = ()  # only these, in the dataset's order
    shuffle: int | None = None  # the seed of a shuffle, the same on every machine and rerun
    limit: int | None = None  # the first N (after the shuffle)

    def apply(self, samples: list[Sample], where: str) -> list[Sample]:
        """The samples taken; ``SweepInputError`` for an id ``where`` (the dataset) lacks."""
        if self.limit is not None and self.limit < 1:
            raise SweepInputError(f"limit: {self.limit} is not a whole number above 0")
        chosen = samples
        if self.sample_ids:
            known = {s.id for s in samples}
            missing = next((i for i in self.sample_ids if i not in known), None)
            if missing is not None:
                raise SweepInputError(f"sample id {missing!r}: no sample of {where} has it")
            wanted = set(self.sample_ids)
            chosen = [s for s in samples if s.id in wanted]
        if self.shuffle is not None:
            chosen = list(chosen)
            random.Random(self.shuffle).shuffle(chosen)
        return chosen if self.limit is None else chosen[: self.limit]
