"""The tool schemas a call offers: spawn tools carry the agents left."""

from __future__ import annotations

from covey.tools.registry import offered, schema, schemas


def test_spawn_tools_say_how_many_agents_may_still_be_opened():
    spawn, delegate, calc = schemas(["spawn_agents", "delegate", "calculator"], agents_left=3)
    assert spawn["function"]["parameters"]["properties"]["agents"]["maxItems"] == 3
    assert "may open 3 more sub-agent(s)" in spawn["function"]["description"]
    assert "may open 3 more sub-agent(s)" in delegate["function"]["description"]
    assert calc == schema("calculator")
    assert "maxItems" not in schema("spawn_agents")["function"]["parameters"]["properties"]["agents"]


def test_without_a_cap_the_schemas_are_the_plain_ones():
    assert schemas(["spawn_agents"], agents_left=None) == [schema("spawn_agents")]


def test_deny_rules_win_over_the_allow_list():
    assert offered(["calculator", "write_file"], ["write_file"]) == ["calculator"]
    assert offered([], []) == []
