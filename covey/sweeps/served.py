"""Whether a grid's models and strategies are served, checked before anything is enqueued.

A worker is the authority on what it serves, but a sweep whose model is a typo
would see every one of its jobs refused; the names no worker serves are refused
up front instead. The workers on the sweep's queue say what they serve when they
publish their catalog (``covey.store.catalog``); when none does, this machine's
settings stand in (what ``covey models`` lists here), and a key left unset here
is no reason to refuse: it may be set on the workers only. A strategy this
machine's install lacks is looked for among what the workers publish, its
options checked against their schema; with none publishing, it is refused.
"""

from __future__ import annotations

from covey.client import strategies
from covey.config.settings import Settings
from covey.models.catalog import Catalog, UnknownModel, UnservableModel
from covey.orchestration.registry import UnknownStrategy
from covey.store.catalog import NoWorkerServes, WorkerEntry, closest, serves_model
from covey.sweeps.errors import SweepInputError
from covey.sweeps.grid import Grid


def check_strategies(grid: Grid, where: str, queue: str, published: list[WorkerEntry]) -> None:
    """``SweepInputError`` naming ``where`` and the first configuration whose strategy
    neither this machine nor the workers on ``queue`` serve, or whose options their
    published schema refuses (a strategy installed here was checked with the grid)."""
    for config in grid.configs:
        try:
            strategies.check_served(published, config.strategy, config.options, queue)
        except (NoWorkerServes, UnknownStrategy) as e:
            raise SweepInputError(f"{where}: configuration {config.name}: {e}") from None


def check_models(
    grid: Grid, settings: Settings, where: str, queue: str, published: list[WorkerEntry], priced: bool = False
) -> None:
    """``SweepInputError`` naming ``where``, the first configuration whose model is not
    served, and the closest name that is. ``published``: the catalog entries of the
    workers on ``queue``, the sweep's (none: this machine's settings are asked instead).
    With ``priced`` (a cost cap), a model this machine knows without prices is refused
    too; the prices of one it does not know are the workers' to check, at the job."""
    catalog = Catalog.from_settings(settings)
    for config in grid.configs:
        name = config.model or settings.model
        said = repr(name) if config.model else f"{name!r} (COVEY_MODEL: the grid names no model)"
        error, known, endpoint = None, [], None
        try:
            endpoint = catalog.endpoint(name)
        except UnknownModel as e:
            error, known = str(e), e.known
        except UnservableModel:  # its key may be set on the workers only
            pass
        if published:
            served = serves_model(published, name)
            known = sorted({model for entry in published for model in entry.model_names()})
            error = (
                None
                if served
                else f"model {said} is served by no worker on queue {queue!r}; served: {', '.join(known)}"
            )
        if error is not None:
            raise SweepInputError(f"{where}: configuration {config.name}: {error}{closest(name, known)}")
        if priced and endpoint is not None and endpoint.price is None:
            raise SweepInputError(
                f"{where}: configuration {config.name}: model {said} has no prices in the models file, "
                "and --max-cost-total caps the sweep in dollars"
            )
