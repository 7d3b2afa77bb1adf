"""An agent's import path, checked: the module imports, the attribute is an agent covey runs
(an OpenAI Agents SDK or a pydantic-ai ``Agent``).

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

OPENAI_AGENTS, PYDANTIC_AI = "openai-agents", "pydantic-ai"  # the frameworks, named as their extras


class AgentNotFound(CoveyError, ValueError):
    """The path names no agent covey runs: one line naming the path and what is wrong."""


class FrameworkMissing(AgentNotFound):
    """The agent's module needs a framework this process lacks (its extra is not installed)."""


_CLASSES = {OPENAI_AGENTS: ("agents", "Agent"), PYDANTIC_AI: ("pydantic_ai", "Agent")}  # module, class


def kind(agent: Any) -> str | None:
    """Which framework ``agent`` is written with, by its class alone: the other
    framework is never imported (each may be absent, or fail to import here)."""
    for cls in type(agent).__mro__:
        for name, (module, class_name) in _CLASSES.items():
            if cls.__module__.partition(".")[0] == module and cls.__name__ == class_name:
                return name
    return None


@lru_cache(maxsize=64)
def load(path: str) -> Any:
    """The agent (an Agents SDK or a pydantic-ai ``Agent``) at ``module.path:attribute``;
    ``AgentNotFound`` otherwise. Cached: a worker imports each agent once, and covey
    wraps its tools once."""
    module_name, _, attrs = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as e:
        if e.name in {module for module, _ in _CLASSES.values()}:
            extra = next(name for name, (module, _) in _CLASSES.items() if module == e.name)
            said = f"agent {path!r} needs {e.name}, not installed here: pip install 'covey[{extra}]'"
            raise FrameworkMissing(said) from None
        raise AgentNotFound(f"agent {path!r}: cannot import module {module_name!r}: {e}") from None
    except Exception as e:
        raise AgentNotFound(f"agent {path!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from None
    for attr in attrs.split("."):
        if not hasattr(found, attr):
            raise AgentNotFound(f"agent {path!r}: module {module_name!r} has no {attrs!r}")
        found = getattr(found, attr)
    framework = kind(found)
    if framework is None:
        raise AgentNotFound(f"agent {path!r} is a {type(found).__name__}, not an Agents SDK or pydantic-ai Agent")
    module, class_name = _CLASSES[framework]
    if not isinstance(found, getattr(importlib.import_module(module), class_name)):  # the framework's own class
        raise AgentNotFound(f"agent {path!r} is a {type(found).__name__}, not an Agents SDK or pydantic-ai Agent")
    return found


def check(path: str) -> bool:
    """Refuse here what cannot run anywhere: True when this process loads the
    agent, False when its module (or its framework) is not installed here, so only the
    workers can tell; ``AgentNotFound`` for a module that imports without it."""
    module_name = path.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return False
    try:
        load(path)
    except FrameworkMissing:
        return False
    return True
