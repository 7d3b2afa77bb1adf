"""Agents written with another framework, run as covey agents.

An OpenAI Agents SDK ``Agent`` named by its import path (``JobSpec(agent=...)``)
runs under the ``agent`` strategy (``covey.agents.strategy``): every model call
the SDK makes is covey's ``CallModel`` (reserved, settled, in the transcript and
the events), every function tool of it runs through covey's tool policy, and a
step run again replays both from their records. The SDK is an optional extra
(``covey[openai-agents]``), imported only where such an agent runs.
"""
