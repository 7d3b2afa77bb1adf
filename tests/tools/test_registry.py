"""The tools a process serves, and the schemas a call offers."""

from __future__ import annotations

import pytest

from covey.tools import registry
from covey.tools.function import tool
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


def test_allow_lists_and_deny_rules_take_patterns_of_names():
    assert offered(["*_file*"], []) == ["read_file", "write_file", "list_files", "edit_file"]
    assert offered(["*_file*", "calculator"], ["write_*", "edit_?ile"]) == ["calculator", "read_file", "list_files"]
    assert offered(None, ["*"]) == []
    assert offered(["[cd]*"], []) == ["delegate", "calculator"]
    assert offered(["Calculator"], []) == []  # names are matched as they are spelt


# --- what a process serves ---------------------------------------------------------


@pytest.fixture
def served(monkeypatch):
    """The registry as a worker starts it (built-ins only), put back after the test."""
    monkeypatch.setattr(registry, "_served", dict(registry._served))
    monkeypatch.setattr(registry, "_loaded", False)


@tool
def forecast(city: str) -> str:
    """Tomorrow's weather."""
    return "sunny"


def test_added_tools_are_served_offered_and_described(served):
    registry.add([forecast])
    assert registry.get("forecast") is forecast
    assert registry.names()[-1] == "forecast" and forecast in registry.served()
    assert offered(None, []) == list(registry.DEFAULT_TOOLS)  # served, yet offered only where named
    assert "forecast" in offered(["forecast"], []) and "forecast" in offered(["*"], [])
    assert registry.schema("forecast")["function"]["parameters"]["required"] == ["city"]
    registry.add([forecast])  # the same tool found twice (an entry point and COVEY_TOOLS) is no clash


def test_a_sources_tools_are_replaced_whole_and_the_others_kept(served, monkeypatch):
    """An MCP server whose list changed: its old tools go, its new ones come, every
    other source's stay; a clash replaces nothing; each replacement is told."""
    from dataclasses import replace

    told: list[list[str]] = []
    monkeypatch.setattr(registry, "_on_change", [lambda: told.append(registry.names())])
    old, kept = replace(forecast, name="srv__old", origin="mcp srv"), replace(forecast, name="mine", origin="function")
    registry.add([old, kept])
    new = [replace(forecast, name=f"srv__{n}", origin="mcp srv") for n in ("old", "tides")]
    registry.renew("mcp srv", new)
    assert registry.names()[-3:] == ["mine", "srv__old", "srv__tides"]
    assert registry.get("srv__old") is new[0] and told == [registry.names()]
    with pytest.raises(registry.ToolsError, match="tool 'mine' from mcp srv clashes with the one from function"):
        registry.renew("mcp srv", [replace(forecast, name="mine", origin="mcp srv")])
    assert registry.names()[-3:] == ["mine", "srv__old", "srv__tides"] and len(told) == 1


def test_a_clash_is_refused_naming_both_origins_and_adds_nothing(served):
    @tool(name="calculator")
    def mine(expression: str) -> str:
        """Not the built-in."""
        return expression

    with pytest.raises(registry.ToolsError) as refused:
        registry.add([forecast, mine])
    assert str(refused.value) == (
        f"tool 'calculator' from function {__name__}:test_a_clash_is_refused_naming_both_origins_and_adds_nothing"
        ".<locals>.mine clashes with the one from builtin"
    )
    assert "forecast" not in registry.names()


def test_a_malformed_name_is_refused(served):
    from dataclasses import replace

    with pytest.raises(registry.ToolsError, match=r"tool 'fore cast' from .*: a tool name must match"):
        registry.add([replace(forecast, name="fore cast")])


def test_check_served_names_each_tool_not_served_and_lists_those_that_are(served):
    registry.check_served(["calculator", "finish"])
    with pytest.raises(registry.NotServed) as refused:
        registry.check_served(["lookup_tides", "calculator", "ask_oracle"])
    assert refused.value.names == ["lookup_tides", "ask_oracle"]
    assert str(refused.value).startswith("tools 'lookup_tides', 'ask_oracle' not served here; served: spawn_agents,")
    registry.check_served(["*_file", "calc*"])  # a pattern is served when it matches a tool served
    with pytest.raises(registry.NotServed) as refused:
        registry.check_served(["inv__*", "calc*"])
    assert refused.value.names == ["inv__*"]


def test_check_names_takes_any_well_formed_name():
    registry.check_names(["lookup_tides", "files__read", "a-b"])
    with pytest.raises(ValueError, match=r"malformed tool names \['a b'\]"):
        registry.check_names(["ok", "a b"])
    with pytest.raises(ValueError, match=r"malformed tool names \['inv__\*'\]"):
        registry.check_names(["inv__*"])  # a name, where only a name will do (a guardrail's)
    registry.check_names(["inv__*", "read_?ile", "[ab]*", "[!x]*"], patterns=True)
    with pytest.raises(ValueError, match=r"malformed tool names or patterns \['inv\.\*'\]"):
        registry.check_names(["inv.*"], patterns=True)


@pytest.mark.parametrize(
    "paths, said",
    [
        ("nope_no_such_module", "COVEY_TOOLS: cannot import 'nope_no_such_module': ModuleNotFoundError"),
        ("tests.tools.test_registry:missing", "COVEY_TOOLS: 'tests.tools.test_registry:missing': module"),
        ("tests.tools.test_registry:offered", "COVEY_TOOLS tests.tools.test_registry:offered: <function offered"),
        ("covey.tools.tool", "COVEY_TOOLS covey.tools.tool: module covey.tools.tool holds no covey Tool"),
    ],
)
def test_a_path_that_does_not_give_tools_stops_the_load_naming_it(served, paths, said):
    with pytest.raises(registry.ToolsError) as refused:
        registry.load(paths)
    assert str(refused.value).startswith(said)
    assert "\n" not in str(refused.value)


def test_load_takes_every_tool_of_a_module_or_the_one_named(served):
    registry.load("tests.tools.test_registry:forecast, tests.integration.served_tools")
    assert {"forecast", "tally", "explode", "hang", "huge", "add"} <= set(registry.names())
    registry.load("nope_no_such_module")  # once per process: a second load does nothing


def test_configured_timeouts_replace_the_registered_ones(served):
    @tool(timeout=0.05)
    async def doze(seconds: float) -> str:
        """Sleep."""
        import asyncio

        await asyncio.sleep(seconds)
        return "rested"

    registry.add([doze])
    registry.load(None, {"doze": 2, "calculator": 5})
    assert (registry.get("doze").timeout, registry.get("calculator").timeout) == (2, 5)
    assert registry.get("doze").run({"seconds": 0.1}, None) == "rested"  # no longer cancelled at 0.05 s


def test_a_configured_timeout_for_a_tool_not_served_stops_the_load(served):
    with pytest.raises(registry.ToolsError, match="COVEY_TOOL_TIMEOUTS: no tool 'lookup_tides' is served; served: "):
        registry.load(None, {"lookup_tides": 5})
