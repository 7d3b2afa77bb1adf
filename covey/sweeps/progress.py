"""A sweep's progress at one moment, and the line that shows it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SweepProgress:
    total: int  # units of the sweep (samples x configurations x repeats)
    done: int  # recorded with an outcome a rerun keeps, before this run or in it
    failed: int  # units that failed, timed out or were refused in this run, with no attempt left
    skipped: int  # units recorded skipped_budget in this run
    in_flight: int
    window: int
    tokens: int  # spent by the jobs recorded in this run
    elapsed: float  # seconds since this run started
    rate: float  # units finished per second in this run
    accuracy: float | None = None  # the primary scorer's mean over the units scored so far (failed ones score 0)

    @property
    def finished(self) -> int:
        return self.done + self.skipped

    @property
    def eta(self) -> float | None:
        left = self.total - self.finished
        return None if self.rate <= 0 else left / self.rate

    def line(self) -> str:
        """The line, as ``120/400 done, 2 failed, 0 skipped, accuracy 87.5% | 8 in flight (window 8) |
        15234 tokens | 12.0s, ETA 28s`` (the accuracy once a unit has ended for good)."""
        eta = "-" if self.eta is None else f"{self.eta:.0f}s"
        accuracy = "" if self.accuracy is None else f", accuracy {self.accuracy:.1%}"
        return (
            f"{self.done}/{self.total} done, {self.failed} failed, {self.skipped} skipped{accuracy} | "
            f"{self.in_flight} in flight (window {self.window}) | {self.tokens} tokens | "
            f"{self.elapsed:.1f}s, ETA {eta}"
        )
