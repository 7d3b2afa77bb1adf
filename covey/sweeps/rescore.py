"""Re-scoring a finished sweep from the outputs ``results.jsonl`` recorded: no job, no Redis.

A scorer is named as on the command line: a built-in kind with its default
options, a scorer of the grid as it ran (by its name, with its options, from
``sweep.json``), or ``module:function``. A ``model`` judge is a job of its own, so
it cannot re-score. Each record that completed is scored by every one named, the
first becoming its ``score``; the others keep no score, as when they ran. A
callable is given each sample as the dataset holds it when ``sweep.json``'s
dataset file is still there unchanged, else one with only its id and target.
"""

from __future__ import annotations

from pathlib import Path

from covey.status import AgentStatus
from covey.sweeps.dataset import Sample, digest, load_dataset
from covey.sweeps.errors import SweepInputError
from covey.sweeps.manifest import MANIFEST_FILE, Manifest
from covey.sweeps.records import Record
from covey.sweeps.scorers import BUILT_IN, Scorer, ScorerSpec, Scoring, mark

LOCAL = tuple(k for k in BUILT_IN if k != "model")


def scorers(names: list[str], manifest: Manifest | None) -> list[Scorer]:
    """The scorers ``names`` name, or ``SweepInputError`` naming one that is unknown
    (and listing the known ones) or a model judge."""
    ran = {s.title: s for s in _grid_scorers(manifest)}
    specs = []
    for name in names:
        if names.count(name) > 1:
            raise SweepInputError(f"--scorer {name} is given twice")
        spec = ran.get(name) or (ScorerSpec(kind=name) if name in LOCAL or ":" in name else None)
        if spec is None:
            known = ", ".join([*LOCAL, *(n for n in ran if n not in LOCAL)])
            raise SweepInputError(f"unknown scorer {name!r}: use one of {known}, or module:function")
        if spec.kind == "model":
            raise SweepInputError(f"scorer {name!r} is a model judge, which runs as a job: re-scoring runs none")
        specs.append(spec.model_copy(update={"name": name}))
    try:
        return Scoring.build(specs).local
    except ValueError as e:
        raise SweepInputError(f"--scorer: {e}") from None


def rescore(directory: Path, records: list[Record], names: list[str]) -> list[Record]:
    """``records`` scored again by the scorers ``names`` name."""
    manifest = Manifest.check(directory, None, None) if (directory / MANIFEST_FILE).exists() else None
    chosen = scorers(names, manifest)
    samples = _samples(manifest)
    again = []
    for record in records:
        record = record.model_copy(update={"score": None, "scores": {}, "score_error": None})
        if record.status == AgentStatus.COMPLETED.value:
            sample = samples.get(record.sample_id) or Sample.model_construct(
                id=record.sample_id, input="", target=record.target, metadata={}
            )
            for scorer in chosen:
                mark(scorer, record, sample)
            record.score = record.scores.get(chosen[0].name)
        again.append(record)
    return again


def _grid_scorers(manifest: Manifest | None) -> list[ScorerSpec]:
    run = (manifest.grid_run or {}) if manifest else {}
    return [ScorerSpec.model_validate(s) for s in run.get("scorers", [])]


def _samples(manifest: Manifest | None) -> dict[str, Sample]:
    """The dataset's samples by id, if its file is still there as the sweep ran it."""
    if manifest is None or manifest.dataset_digest is None:
        return {}
    try:
        samples = load_dataset(manifest.dataset)
    except SweepInputError:
        return {}
    return {s.id: s for s in samples} if digest(samples) == manifest.dataset_digest else {}
