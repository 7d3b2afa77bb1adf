"""The in-flight window: how many jobs a sweep keeps enqueued at once.

Additive increase, multiplicative decrease, as TCP does for congestion: a job
that failed on a rate limit (HTTP 429) halves the window, and every window's
worth of successes widens it by one, up to the ``--max-in-flight`` ceiling.
Pressure on the sweep's budget shuts it to one, so jobs stop holding
reservations against each other and a refusal means the scope is truly dry.
Pure: the runner feeds it outcomes.
"""

from __future__ import annotations


class Window:
    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {ceiling}")
        self.ceiling = ceiling
        self.size = ceiling
        self.low = ceiling  # the smallest it has been: reported, so a run shows it backed off
        self._successes = 0

    def rate_limited(self) -> None:
        self._set(max(1, self.size // 2))

    def budget_pressed(self) -> None:
        self._set(1)

    def succeeded(self) -> None:
        self._successes += 1
        if self._successes >= self.size and self.size < self.ceiling:
            self._set(self.size + 1)

    def _set(self, size: int) -> None:
        self.size, self._successes = size, 0
        self.low = min(self.low, size)
