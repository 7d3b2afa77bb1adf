"""The sim's answers to the debate strategy's structured calls, by schema name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from covey.models.sim.scripted.prompt import Prompt

SCRIPTS: dict[str, Callable[[Prompt], Any]] = {}
