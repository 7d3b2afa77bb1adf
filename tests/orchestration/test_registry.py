"""Strategies by name: the built-ins, and one another package registers."""

from __future__ import annotations

import textwrap

import pytest

from covey.orchestration import registry
from covey.orchestration.actions import Finish
from covey.spec import InvalidSpec, JobSpec

ECHO = textwrap.dedent(
    """
    from typing import Literal
    from pydantic import BaseModel, ConfigDict
    from covey.orchestration.actions import Finish
    from covey.orchestration.states import StrategyState
    from covey.status import AgentStatus

    NAME = "echo"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        times: int = 1

    class State(StrategyState):
        phase: Literal["done"] = "done"

    def start(spec, ctx):
        times = Options.model_validate(spec.options).times
        return Finish(state=State(), status=AgentStatus.COMPLETED, output=" ".join([spec.task] * times))

    def resume(spec, ctx, state, outcome):
        raise TypeError("echo never waits")
    """
)


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a package, as pip would, that registers ``echo`` and a broken ``half``."""
    dist = tmp_path / "covey_echo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: covey-echo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[covey.strategies]\necho = covey_echo_strategy\nhalf = covey_echo_strategy:Options\n"
    )
    (tmp_path / "covey_echo_strategy.py").write_text(ECHO)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._plugins.cache_clear()
    registry.strategy.cache_clear()
    yield
    registry._plugins.cache_clear()
    registry.strategy.cache_clear()


def test_the_built_ins_are_known_by_name():
    assert {"react", "single"} <= set(registry.names())
    assert registry.strategy("single").NAME == "single"


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(registry.UnknownStrategy, match="unknown strategy 'telepathy'; known: .*react"):
        registry.strategy("telepathy")


def test_a_strategy_from_the_entry_point_group_runs_and_its_options_are_checked(installed):
    assert "echo" in registry.names()
    spec = JobSpec.parse({"task": "hi", "strategy": "echo", "options": {"times": 2}})
    done = registry.strategy("echo").start(spec, None)
    assert isinstance(done, Finish) and done.output == "hi hi"
    with pytest.raises(InvalidSpec, match="options.times:"):
        JobSpec.parse({"task": "hi", "strategy": "echo", "options": {"times": "many"}})


def test_a_registered_object_that_is_no_strategy_is_refused_by_name(installed):
    with pytest.raises(registry.UnknownStrategy, match="strategy 'half' .* lacks NAME, Options, start, resume"):
        registry.strategy("half")
