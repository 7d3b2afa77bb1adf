"""A model's prices and what a call costs, in integer micro-dollars: pure arithmetic.

Prices are USD per million tokens, as providers list them, so one token costs
``price`` micro-dollars. The ledger holds whole micro-dollars: a call's cost is
rounded up, and the worst case reserved before it (every prompt token at the
dearer of the input prices, every reply token it may make at the output price)
is never below what its reported usage then costs. The arithmetic is exact
(``Decimal``); the reply's share is left to the ledger's script, which clamps the
reply to the money left (``reply_cost`` is the same rounding, for a test to hold it to).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MICROS = 1_000_000  # micro-dollars in a dollar
# Six decimals of a dollar per million tokens: a call's cost is then exact to a
# millionth of a micro-dollar, which the ledger script's doubles hold without error.
PRICE_PLACES = 6
MAX_PRICE = Decimal(10_000)  # USD per million tokens: far above any listed price, and a typo's bound

UsdPerMillion = Annotated[Decimal, Field(ge=0, le=MAX_PRICE, decimal_places=PRICE_PLACES, allow_inf_nan=False)]


class Price(BaseModel):
    """``price = { input = 0.15, cached_input = 0.075, output = 0.60 }``: USD per million
    tokens; ``cached_input`` (prompt tokens the provider served from its cache) is
    ``input`` when not given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: UsdPerMillion
    output: UsdPerMillion
    cached_input: UsdPerMillion | None = None

    @property
    def cached(self) -> Decimal:
        return self.input if self.cached_input is None else self.cached_input

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> int:
        """Micro-dollars a call's reported usage costs (``cached_tokens`` are part of
        ``prompt_tokens``, as the OpenAI API reports them)."""
        cached = min(cached_tokens, prompt_tokens)
        exact = (prompt_tokens - cached) * self.input + cached * self.cached + completion_tokens * self.output
        return math.ceil(exact)

    def prompt_cost(self, prompt_tokens: int) -> int:
        """The most ``prompt_tokens`` can cost, whichever of them are cached."""
        return math.ceil(prompt_tokens * max(self.input, self.cached))

    def reply_cost(self, completion_tokens: int) -> int:
        return math.ceil(completion_tokens * self.output)


def micros(usd: float | Decimal) -> int:
    """A cap in dollars as the ledger keeps it: whole micro-dollars, rounded down
    (a cap never grows in the conversion)."""
    return math.floor(Decimal(str(usd)) * MICROS)


def usd(micro_dollars: int | None) -> float | None:
    """Micro-dollars as dollars, for people and JSON."""
    return None if micro_dollars is None else micro_dollars / MICROS


def dearest(prices: list[Price]) -> Price:
    """A price no lower than any of ``prices`` for any token: each rate's highest."""
    return Price(
        input=max(p.input for p in prices),
        output=max(p.output for p in prices),
        cached_input=max(p.cached for p in prices),
    )
