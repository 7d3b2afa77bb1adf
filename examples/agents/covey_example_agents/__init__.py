"""Agents SDK agents a covey worker runs once this package is installed beside it."""
