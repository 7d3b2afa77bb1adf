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
from covey.models.catalog import Catalog, UnknownModel, UnservableModel
from covey.sweeps.errors import SweepInputError
from covey.sweeps.grid import Grid


def check_models(grid: Grid, settings: Settings, where: str, priced: bool = False) -> None:
    """``SweepInputError`` naming ``where``, the first configuration whose model no endpoint here serves,
    and the closest name that is served; with ``priced`` (a cost cap), one whose model has no prices."""
    catalog = Catalog.from_settings(settings)
    for config in grid.configs:
        model = config.model or settings.model
        try:
            endpoint = catalog.endpoint(model)
        except UnknownModel as e:
            close = difflib.get_close_matches(e.name, e.known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SweepInputError(f"{where}: configuration {config.name}: {e}{hint}") from None
        except UnservableModel:  # its key may be set on the workers only: its prices are theirs to check
            continue
        if priced and endpoint.price is None:
            raise SweepInputError(
                f"{where}: configuration {config.name}: model {model!r} has no prices in the models file, "
                "and --max-cost-total caps the sweep in dollars"
            )
