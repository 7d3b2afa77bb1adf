"""Twenty tools a worker serves beside covey's built-ins, for ``bench/tool_surface.py``:
an inventory service's, each with two described arguments, about the size of a
typical function tool. ``COVEY_TOOLS=bench.surface_tools`` serves them all."""

from __future__ import annotations

from covey import tool

ACTIONS = ("lookup", "reserve", "release", "count", "move")
THINGS = ("item", "order", "shelf", "supplier")


def _made(action: str, thing: str):
    def run(key: str, note: str) -> str:
        """Args:
        key: the identifier of the record, as the inventory service prints it
        note: a free-text reason kept with the change, for the audit log
        """
        return f"{action} {thing} {key}: done"

    description = (
        f"{action.capitalize()} one {thing} of the inventory service by its key, with a note for the audit log."
    )
    return tool(name=f"inv__{action}_{thing}", description=description)(run)


for _action in ACTIONS:
    for _thing in THINGS:
        globals()[f"inv__{_action}_{_thing}"] = _made(_action, _thing)
