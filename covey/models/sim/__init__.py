"""``sim``: the deterministic model behind the real OpenAI SDK, in-process or over HTTP."""

from covey.models.sim.handler import make_handler, transport

__all__ = ["make_handler", "transport"]
