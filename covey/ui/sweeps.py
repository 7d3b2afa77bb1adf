"""The sweeps pages: what ``covey sweep`` wrote under one folder (``covey ui
--sweeps DIR``: each sweep a directory of it, as ``--out`` made it), read from
disk as ``covey sweep-report`` reads it, and each sample's transcripts from
Redis while its jobs' records last.

- ``/sweeps``: the sweeps there, newest first;
- ``/sweeps/NAME``: its summary table and chart, and every sample's score in each
  configuration;
- ``/sweeps/NAME/samples/ID``: that sample in every configuration side by side:
  status, score, answer against target, and each unit's transcripts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from covey.client import Client
from covey.sweeps.errors import SweepInputError, UnknownSample
from covey.sweeps.manifest import MANIFEST_FILE
from covey.sweeps.records import RESULTS_FILE, Record, ResultsLog
from covey.sweeps.report import SUMMARY_PNG, summarize
from covey.sweeps.transcripts import of_sample
from covey.ui import views
from covey.ui.pages import templates

SAMPLES_SHOWN = 500  # a sweep page's samples; the rest are a sample page away


class SweepPages:
    def __init__(self, client: Client, root: Path | None) -> None:
        self._client, self._root = client, root

    def sweeps(self, request: Request) -> Response:
        root = self._folder()
        found = sorted(
            (d for d in root.iterdir() if (d / RESULTS_FILE).is_file() or (d / MANIFEST_FILE).is_file()),
            key=lambda d: _changed(d),
            reverse=True,
        )
        now = datetime.now(UTC)
        listed = [(d.name, views.ago(_changed(d), now)) for d in found]
        return templates.TemplateResponse(request, "sweeps.html", {"root": root, "sweeps": listed})

    def sweep(self, request: Request) -> Response:
        name, directory = self._sweep(request)
        latest = _latest(directory)
        configs = sorted({r.config for r in latest.values()})
        samples: dict[str, dict[str, list[Record]]] = {}
        for record in sorted(latest.values(), key=lambda r: (_natural(r.sample_id), r.repeat)):
            samples.setdefault(record.sample_id, {}).setdefault(record.config, []).append(record)
        return templates.TemplateResponse(
            request,
            "sweep.html",
            {
                "name": name,
                "summary": summarize(latest.values()),
                "chart": (directory / SUMMARY_PNG).is_file(),
                "configs": configs,
                "samples": list(samples.items())[:SAMPLES_SHOWN],
                "sample_count": len(samples),
                "verdict": _verdict,
            },
        )

    def chart(self, request: Request) -> Response:
        _, directory = self._sweep(request)
        path = directory / SUMMARY_PNG
        if not path.is_file():
            raise HTTPException(404, f"{directory.name} has no chart yet: covey sweep-report draws it")
        return FileResponse(path, media_type="image/png")

    def sample(self, request: Request) -> Response:
        name, directory = self._sweep(request)
        sample_id = request.path_params["sample_id"]
        try:
            units = of_sample(directory, sample_id, self._client)
        except UnknownSample as e:
            raise HTTPException(404, str(e)) from None
        except SweepInputError as e:  # a line of its results that is no record, named
            raise HTTPException(422, str(e)) from None
        units.sort(key=lambda u: (u.record.config, u.record.repeat))
        shown = [(u, views.rows([n for n, _ in u.agents]), {n.agent_id: t for n, t in u.agents}) for u in units]
        return templates.TemplateResponse(
            request, "sample.html", {"name": name, "sample_id": sample_id, "units": shown}
        )

    def _folder(self) -> Path:
        if self._root is None:
            raise HTTPException(404, "covey ui was started without --sweeps DIR: it shows no sweeps")
        if not self._root.is_dir():
            raise HTTPException(404, f"{self._root}: no such folder (covey ui --sweeps)")
        return self._root

    def _sweep(self, request: Request) -> tuple[str, Path]:
        """The sweep the path names: a directory right under the folder, never above it."""
        root, name = self._folder(), request.path_params["name"]
        directory = root / name
        if name in (".", "..") or "/" in name or not (directory / RESULTS_FILE).is_file():
            raise HTTPException(404, f"no sweep {name!r} in {root} (a sweep's directory holds {RESULTS_FILE})")
        return name, directory


def _latest(directory: Path) -> dict[str, Record]:
    try:
        return ResultsLog(directory).latest()
    except SweepInputError as e:  # a line that is no record: say which, as sweep-report does
        raise HTTPException(422, str(e)) from None


def _verdict(record: Record) -> str:
    """A unit's cell as a class: ``right`` (full marks), ``wrong``, or, unscored, its status."""
    if record.score is None:
        return record.status
    return "right" if record.score >= 1 else "wrong"


def _changed(directory: Path) -> datetime:
    files = [directory / RESULTS_FILE, directory / MANIFEST_FILE]
    return datetime.fromtimestamp(max(f.stat().st_mtime for f in files if f.exists()), UTC)


def _natural(sample_id: str) -> tuple[int, int | str]:
    """Sample ids in the order a person counts them: 2 before 10."""
    return (0, int(sample_id)) if sample_id.isdigit() else (1, sample_id)
