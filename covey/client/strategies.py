"""Whether a spec's strategy is served: by this machine's install, or else by the
workers on its queue, as their catalog publishes it (``covey.store.catalog``).

A strategy a plugin registers on the workers alone is known here only by name;
the schema of its options they publish checks a spec's options. With no worker
publishing strategies, this machine's install has the say.
"""

from __future__ import annotations

from typing import Any

from covey.orchestration import registry
from covey.store.catalog import WorkerEntry, check_strategy


def installed(name: str) -> bool:
    """Whether this machine's install registers strategy ``name``."""
    return name in registry.names()


def check_served(entries: list[WorkerEntry], name: str, options: dict[str, Any], queue: str) -> None:
    """Nothing for a strategy installed here (the spec's own validation checked it);
    else ``NoWorkerServes`` when the workers' ``entries`` on ``queue`` do not serve it
    or refuse its ``options``, or ``registry.UnknownStrategy`` when none publishes
    strategies."""
    if installed(name):
        return
    if not check_strategy(entries, name, options, queue):
        registry.strategy(name)  # no worker publishes strategies: this machine's say
