"""The tools agents call: the built-ins' schemas and the registry that names them.

Pure data and lookups, below the contract: the spec checks tool names here, the
strategies offer tools from here, and the worker runs them (``covey.worker.tools``).
"""
