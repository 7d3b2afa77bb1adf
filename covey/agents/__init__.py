"""Agents written with another framework, run as covey agents.

An OpenAI Agents SDK or pydantic-ai ``Agent`` named by its import path
(``JobSpec(agent=...)``) runs under the ``agent`` strategy (``covey.agents.strategy``):
every model call the framework makes is covey's ``CallModel`` (reserved,
settled, in the transcript and the events), every function tool of it runs
through covey's tool policy, and a step run again replays both from their
records (``covey.agents.session``). Each framework is an optional extra
(``covey[openai-agents]``, ``covey[pydantic-ai]``), imported only where such an
agent runs: ``sdk_*`` modules hold the Agents SDK's side, ``pydantic_*`` pydantic-ai's.
"""
