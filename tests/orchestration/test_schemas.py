"""Every JSON schema a built-in strategy asks a model for fits OpenAI's strict mode
(but for the length bounds of strings, which a strict request leaves out), so a
strict endpoint accepts the request and never answers off-schema."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import covey.orchestration
from covey.models.structured import response_format, strict_form
from covey.orchestration import debate, lats, orchestrate, plan

BUILT_IN = {
    "debate proposal": debate.PROPOSAL_SCHEMA,
    "debate revision": debate.REVISION_SCHEMA,
    "debate critique": debate.critique_schema([0, 2, 3]),
    "lats candidates": lats.candidates_schema(3),
    "lats evaluation": lats.EVALUATION_SCHEMA,
    "orchestrate assignments": orchestrate.assignments_schema(orchestrate.Options()),
    "orchestrate decision": orchestrate.DECISION_SCHEMA,
    "orchestrate qa verdict": orchestrate.QA_SCHEMA,
    "plan_execute plan": plan.schema(plan.Limits(8, frozenset({"calculator"}))),
    "plan_execute replan, agents alone": plan.schema(plan.Limits(8, frozenset(), agents=True), ["step_1"]),
    "plan_execute plan, tools alone": plan.schema(plan.Limits(8, frozenset({"calculator"}), agents=False)),
}


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_built_in_schema_fits_strict_mode_and_is_sent_strict(name):
    schema = BUILT_IN[name]
    assert strict_form(schema) is not None
    assert response_format(schema, "x")["json_schema"]["strict"] is True


def test_no_module_level_schema_is_left_out():
    """A new ``*_SCHEMA`` constant in the strategies' package must join ``BUILT_IN``."""
    known = {id(s) for s in BUILT_IN.values()}
    for info in pkgutil.iter_modules(covey.orchestration.__path__):
        module = importlib.import_module(f"covey.orchestration.{info.name}")
        for attr, value in vars(module).items():
            if attr.endswith("_SCHEMA") and isinstance(value, dict) and "properties" in value:
                assert id(value) in known, f"{info.name}.{attr} is not checked"
