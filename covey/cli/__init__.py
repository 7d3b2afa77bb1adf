"""The ``covey`` command line."""

from covey.cli.app import cli, main

__all__ = ["cli", "main"]
