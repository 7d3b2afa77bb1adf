"""Scope names: built and checked in one place."""

from __future__ import annotations

import pytest

from covey.budgets import scopes


def test_a_job_is_charged_to_global_then_its_tenant_and_its_sweep():
    assert scopes.of_job(None, None) == ["global"]
    assert scopes.of_job("acme", "s1") == ["global", "tenant:acme", "sweep:s1"]


@pytest.mark.parametrize("name", ["global", "tenant:acme", "sweep:a.b_c-1"])
def test_what_it_builds_it_accepts(name):
    scopes.check(name)
    assert scopes.kind(name) == name.split(":")[0]


@pytest.mark.parametrize("name", ["", "globals", "tenant:", "tenant:no spaces", "team:x", "sweep:" + "x" * 65])
def test_anything_else_is_refused_saying_what_a_name_looks_like(name):
    with pytest.raises(ValueError, match="must be global, tenant:<name> or sweep:<name>"):
        scopes.check(name)
