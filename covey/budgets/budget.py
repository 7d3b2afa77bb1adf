"""The budget an agent runs under: pure arithmetic, no Redis.

A budget bounds a whole subtree: tokens and cycles spent by an agent and all its
descendants, agents spawned below it, and how many more levels may be spawned.
The ledger enforces it across workers; this module only says what a child asks for.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Budget(BaseModel):
    """Caps for one agent's subtree. ``None`` means unlimited; depth is always set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, ge=0)
    max_cycles: int | None = Field(default=None, ge=0)
    max_agents: int | None = Field(default=None, ge=0)
    max_depth: int = Field(default=3, ge=0)
    deadline: datetime | None = None

    @field_validator("deadline")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("deadline must carry a timezone (UTC)")
        return value.astimezone(timezone.utc) if value is not None else None

    def child(self, fraction: float = 0.5) -> Budget:
        """What a child asks for: a share of tokens and cycles, half the spawns
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
        )

    def expired(self, now: datetime) -> bool:
        return self.deadline is not None and now >= self.deadline


def _share(value: int | None, fraction: float) -> int | None:
    return None if value is None else max(1, math.floor(value * fraction))
