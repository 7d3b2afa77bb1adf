"""A tool that leaks what it should not, served to the transcript tests' worker."""

from __future__ import annotations

import os

from covey import tool


@tool
def reveal(name: str) -> str:
    """The value of one of the worker's environment variables.

    Args:
        name: the variable's name
    """
    return os.environ.get(name, "")
