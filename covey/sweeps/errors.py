"""The one error a sweep's inputs raise: a file, a line or field, and what is wrong."""

from __future__ import annotations

from covey.errors import CoveyError


class SweepInputError(CoveyError, ValueError):
    """A dataset, grid or scorer that cannot run. The message is one line naming
    the file and the line or field at fault; nothing has been enqueued."""


class UnknownSample(SweepInputError, LookupError):
    """A sample the sweep's results do not hold (the message lists some that they do)."""
