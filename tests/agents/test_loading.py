"""An agent's import path checked where it can be: the worker loads it, a client checks what it can."""

from __future__ import annotations

import pytest

from covey.agents import loading


def test_a_client_lets_through_a_module_only_the_workers_may_have_and_refuses_one_it_has_that_holds_no_agent():
    assert loading.check("covey_example_agents.triage:triage") is True
    assert loading.check("surely_not_installed_here.agents:triage") is False
    with pytest.raises(loading.AgentNotFound, match="is a str, not an Agents SDK or pydantic-ai Agent"):
        loading.check("tests.agents.sdk_agents:not_an_agent")
    with pytest.raises(loading.AgentNotFound, match="module 'tests.agents.sdk_agents' has no 'nope'"):
        loading.check("tests.agents.sdk_agents:nope")


def test_an_agent_whose_framework_is_missing_here_is_left_to_the_workers(tmp_path, monkeypatch):
    (tmp_path / "needs_missing_framework.py").write_text("import pydantic_ai\nimport agents\nagent = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(__import__("sys").modules, "agents", None)  # as where the extra is not installed
    assert loading.check("needs_missing_framework:agent") is False
    with pytest.raises(
        loading.FrameworkMissing, match=r"needs agents, not installed here: pip install 'covey\[openai-agents\]'"
    ):
        loading.load("needs_missing_framework:agent")
