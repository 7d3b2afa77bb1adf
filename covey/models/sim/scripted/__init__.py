"""How the sim answers each strategy's structured calls, so every strategy runs end
to end on the sim with answers a test can predict.

A strategy names the JSON schema of each call it makes (``CallModel.schema_name``);
a request whose ``response_format`` carries a name found here is answered by that
script, any other by a generic instance of its schema. A script is a pure function
of the ``Prompt``, so the same request always gets the same answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from covey.models.sim.scripted import debate, lats, orchestrate, plan_execute
from covey.models.sim.scripted.prompt import Prompt

__all__ = ["SCRIPTS", "Prompt"]

SCRIPTS: dict[str, Callable[[Prompt], Any]] = {
    **plan_execute.SCRIPTS,
    **debate.SCRIPTS,
    **lats.SCRIPTS,
    **orchestrate.SCRIPTS,
}
