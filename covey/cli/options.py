"""Option types that more than one command takes."""

from __future__ import annotations

import json
import math

import click

from covey.budgets.budget import MAX_SECONDS, MAX_USD


class Seconds(click.FloatRange):
    """Seconds: a finite number above 0, at most ``MAX_SECONDS`` (``nan`` passes a
    plain FloatRange, since it compares false both ways)."""

    def __init__(self) -> None:
        super().__init__(0, MAX_SECONDS, min_open=True)

    def convert(self, value, param, ctx):
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        return seconds


class Dollars(click.FloatRange):
    """A cost cap in USD: a finite number from 0 to ``MAX_USD`` (whose micro-dollars
    the ledger holds exactly)."""

    name = "USD"

    def __init__(self) -> None:
        super().__init__(0, MAX_USD)

    def convert(self, value, param, ctx):
        usd = super().convert(value, param, ctx)
        if math.isnan(usd):
            self.fail(f"{value!r} is not a number of dollars", param, ctx)
        return usd


class KeyValue(click.ParamType):
    """``KEY=VALUE`` with VALUE read as JSON (``3``, ``true``, ``{"a": 1}``), or as the
    text itself when it is not JSON, so ``--option mode=score`` needs no quotes."""

    name = "KEY=VALUE"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        key, sep, raw = str(value).partition("=")
        if not sep or not key.strip():
            self.fail(f"{value!r} is not KEY=VALUE", param, ctx)
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return key.strip(), parsed


def names(value: str | None) -> list[str] | None:
    """A comma-separated list of names (``--tools calculator, read_file``), blanks dropped; None when not given."""
    return None if value is None else [n.strip() for n in value.split(",") if n.strip()]
