"""Tools for covey agents, registered by the ``covey.tools`` entry point in pyproject.toml."""
