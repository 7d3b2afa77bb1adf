"""Budgets: the pure ``Budget`` model and the Redis ``Ledger`` that enforces it."""

from covey.budgets.budget import Budget

__all__ = ["Budget"]
