"""The tools agents call: the ``Tool`` record, the built-ins, ``@tool``, the
registry of what this process serves, and the policy every call runs under.

Below the contract and beside models and store: the spec checks tool names here,
strategies offer tools from here, and the worker runs them (``covey.worker.tools``),
building the workspace view a tool sees.
"""
