"""Whether this machine's settings serve a grid's models, checked before anything is enqueued.

A worker is the authority on what it serves, but a sweep whose model is a typo
would see every one of its jobs refused; the names the models file and the
default endpoint (what ``covey models`` lists here) cannot serve are refused up
front instead. A key left unset here is no reason to refuse: it may be set on the
workers only.
"""

from __future__ import annotations

import difflib

from covey.config.settings import Settings
from covey.models.catalog import Catalog, UnknownModel
from covey.sweeps.errors import SweepInputError
from covey.sweeps.grid import Grid


def check_models(grid: Grid, settings: Settings, where: str) -> None:
    """``SweepInputError`` naming ``where``, the first configuration whose model no endpoint here serves,
    and the closest name that is served."""
    catalog = Catalog.from_settings(settings)
    for config in grid.configs:
        try:
            catalog.endpoint(config.model or settings.model)
        except UnknownModel as e:
            close = difflib.get_close_matches(e.name, e.known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SweepInputError(f"{where}: configuration {config.name}: {e}{hint}") from None
