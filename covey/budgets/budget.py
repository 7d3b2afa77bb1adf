"""The budget an agent runs under: pure arithmetic, no Redis.

A budget bounds a whole subtree: tokens and cycles spent by an agent and all its
descendants, agents spawned below it, and how many more levels may be spawned.
The ledger enforces it across workers; this module only says what a child asks for.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator

# Every cap and timeout has an upper bound that survives the trip through JSON and
# Redis: the ledger's Lua scripts compute in doubles, and JSON readers in other
# languages (JavaScript) hold integers exactly only up to 2^53 - 1.
MAX_COUNT = 2**53 - 1
# The longest timeout, about 31 years: any deadline now + it is still a datetime
# (year 9999 is the limit), and a finite float.
MAX_SECONDS = 10**9

# A whole number as JSON carries one: never a bool, a float or a string.
Count = Annotated[int, Strict(), Field(le=MAX_COUNT)]
# A number as JSON carries one: finite, never a bool or a string.
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
Seconds = Annotated[Number, Field(le=MAX_SECONDS)]
# The largest cost cap in USD: its micro-dollars are still a whole number JSON and Lua hold exactly.
MAX_USD = MAX_COUNT // 1_000_000
Dollars = Annotated[Number, Field(ge=0, le=MAX_USD)]


class Budget(BaseModel):
    """Caps for one agent's subtree. ``None`` means unlimited; depth is always set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: Count | None = Field(default=None, ge=0)
    max_cycles: Count | None = Field(default=None, ge=0)
    max_agents: Count | None = Field(default=None, ge=0)
    max_depth: Count = Field(default=3, ge=0)
    deadline: datetime | None = None
    # Of the whole job, held on the root's ledger row: a child's budget carries none.
    max_tool_calls: Count | None = Field(default=None, ge=0)
    max_cost: Dollars | None = Field(
        default=None, description="USD the subtree may spend, where its models have prices"
    )

    @field_validator("deadline")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("deadline must carry a timezone (UTC)")
        try:
            return value.astimezone(UTC) if value is not None else None
        except OverflowError:  # e.g. 0001-01-01T00:00+01:00 is before year 1 in UTC
            raise ValueError("deadline is out of range in UTC") from None

    def child(self, fraction: float = 0.5) -> Budget:
        """What a child asks for: a share of tokens, cycles and cost, half the spawns
        (at least 1), one level less, the same deadline.

        The ledger clamps this to what the parent has left when it opens the child.
        """
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        if self.max_depth < 1:
            raise ValueError("max_depth is 0: this budget cannot have children")
        return Budget(
            max_tokens=_share(self.max_tokens, fraction),
            max_cycles=_share(self.max_cycles, fraction),
            max_agents=None if self.max_agents is None else max(1, self.max_agents // 2),
            max_depth=self.max_depth - 1,
            deadline=self.deadline,
            max_cost=None if self.max_cost is None else self.max_cost * fraction,
        )

    def expired(self, now: datetime) -> bool:
        return self.deadline is not None and now >= self.deadline


def _share(value: int | None, fraction: float) -> int | None:
    return None if value is None else max(1, math.floor(value * fraction))
