"""An agent's import path, checked: the module imports, the attribute is an Agents SDK ``Agent``.

A worker refuses a spec whose agent it cannot load (``invalid_spec``, the path
named); a client checks what it can before sending: a module it cannot find may
live only on the workers, everything else is refused at once.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from typing import Any

from covey.errors import CoveyError

EXTRA = "covey[openai-agents]"


class AgentNotFound(CoveyError, ValueError):
    """The path names no Agents SDK agent: one line naming the path and what is wrong."""


def sdk() -> Any:
    """The Agents SDK module, or ``AgentNotFound`` saying which extra installs it."""
    try:
        return importlib.import_module("agents")
    except ImportError as e:
        raise AgentNotFound(f"the OpenAI Agents SDK is not installed here: pip install '{EXTRA}' ({e})") from None


@lru_cache(maxsize=64)
def load(path: str) -> Any:
    """The ``Agent`` at ``module.path:attribute``; ``AgentNotFound`` otherwise. Cached:
    a worker imports each agent once, and covey wraps its tools once."""
    agent_class = sdk().Agent
    module_name, _, attrs = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise AgentNotFound(f"agent {path!r}: cannot import module {module_name!r}: {e}") from None
    except Exception as e:
        raise AgentNotFound(f"agent {path!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from None
    for attr in attrs.split("."):
        if not hasattr(found, attr):
            raise AgentNotFound(f"agent {path!r}: module {module_name!r} has no {attrs!r}")
        found = getattr(found, attr)
    if not isinstance(found, agent_class):
        raise AgentNotFound(f"agent {path!r} is a {type(found).__name__}, not an Agents SDK Agent")
    return found


def check(path: str) -> bool:
    """Refuse here what cannot run anywhere: True when this process loads the
    agent, False when its module (or the SDK) is not installed here, so only the
    workers can tell; ``AgentNotFound`` for a module that imports without it."""
    module_name = path.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or importlib.util.find_spec("agents") is None:
        return False
    load(path)
    return True
