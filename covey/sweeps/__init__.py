"""Batch evaluation sweeps: a dataset times a grid of configurations, under one cap.

``run_sweep`` (and ``covey sweep``) runs every sample x configuration x repeat as
a covey job charged to the ledger scope ``sweep:<id>``, streams each outcome to
``DIR/results.jsonl``, and ``report`` summarises it per configuration.
"""

from covey.sweeps.dataset import Sample, load_dataset
from covey.sweeps.errors import SweepInputError
from covey.sweeps.grid import Config, Grid, load_grid
from covey.sweeps.runner import SweepOutcome, run_sweep

__all__ = ["Config", "Grid", "Sample", "SweepInputError", "SweepOutcome", "load_dataset", "load_grid", "run_sweep"]
