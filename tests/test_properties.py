"""Property tests of the spec as the client sees it: whatever a caller sends,
``JobSpec.parse`` either returns a spec that survives JSON or raises ``InvalidSpec``.

The CLI and the wire get the same treatment against a real worker in
tests/integration/test_properties_io.py, which shares ``spec_data`` (anything, near
a spec) and ``valid_spec_data`` (specs that pass, numbers anywhere in range).
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from covey.budgets.budget import MAX_COUNT, MAX_SECONDS
from covey.spec import MAX_CALL_TOKENS, InvalidSpec, JobSpec

# Numbers at and around every edge the spec has, beside arbitrary ones.
EDGE_INTS = [0, 1, -1, 2**31, 2**53 - 1, 2**53, 2**63, 2**64, 10**20, 10**40]
EDGE_FLOATS = [0.0, -0.0, 1e-300, 0.5, 1.0, 1e9, 1e9 + 1, 1e308, float("inf"), float("-inf"), float("nan")]

numbers = st.one_of(st.sampled_from(EDGE_INTS), st.integers(), st.sampled_from(EDGE_FLOATS), st.floats(), st.booleans())
scalars = st.one_of(st.none(), numbers, st.text(max_size=20))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
TASKS = ["What is 6 * 7?", "[sim:answer hi] hello", "[sim:tokens 3] short", "", "請總結", "[sim:nonsense] x"]


def _field(values: st.SearchStrategy) -> st.SearchStrategy:
    """A field's value: mostly of the kind it takes, sometimes anything JSON holds."""
    return st.one_of(values, json_values)


budget = st.fixed_dictionaries(
    {},
    optional={
        "max_tokens": _field(numbers),
        "max_cycles": _field(numbers),
        "max_agents": _field(numbers),
        "max_depth": _field(numbers),
        "deadline": _field(st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()) | st.text(max_size=30)),
    },
)
spec_data = st.fixed_dictionaries(
    {"task": _field(st.sampled_from(TASKS))},
    optional={
        "budget": _field(budget),
        "max_cycles": _field(numbers),
        "max_call_tokens": _field(numbers),
        "timeout": _field(numbers),
        "child_fraction": _field(numbers),
        "model_params": _field(
            st.fixed_dictionaries({}, optional={"temperature": numbers, "top_p": numbers, "seed": numbers})
        ),
        "strategy": _field(st.sampled_from(["react", "single", "debate", "nope"])),
        "options": json_values,
        "tools": _field(st.lists(st.sampled_from(["calculator", "finish", "rm_rf", "rm -rf"]), max_size=3)),
        "deny": _field(st.lists(st.sampled_from(["write_file", "x"]), max_size=2)),
        "tenant": _field(st.text(max_size=70)),
        "role": _field(st.text(max_size=70)),
        "model": _field(st.sampled_from(["sim", ""])),
    },
)

# Specs that pass validation, with every number anywhere in its range.
counts = st.one_of(st.sampled_from([0, 1, MAX_COUNT]), st.integers(0, MAX_COUNT))
valid_spec_data = st.fixed_dictionaries(
    {"task": st.sampled_from([t for t in TASKS if t])},
    optional={
        "budget": st.fixed_dictionaries(
            {}, optional={"max_tokens": counts, "max_cycles": counts, "max_agents": counts, "max_depth": counts}
        ),
        "max_cycles": st.integers(1, MAX_COUNT),
        "max_call_tokens": st.one_of(st.sampled_from([1, MAX_CALL_TOKENS]), st.integers(1, MAX_CALL_TOKENS)),
        "timeout": st.floats(1e-3, MAX_SECONDS),
        "child_fraction": st.floats(1e-9, 1),
        "strategy": st.sampled_from(["react", "single"]),
        "model_params": st.fixed_dictionaries(
            {}, optional={"temperature": st.floats(0, 2), "seed": st.integers(-MAX_COUNT, MAX_COUNT)}
        ),
    },
)


def _within_json(value: Any) -> None:
    """Every number a parsed spec holds is finite and, if whole, under 2^53."""
    if isinstance(value, dict):
        for v in value.values():
            _within_json(v)
    elif isinstance(value, list):
        for v in value:
            _within_json(v)
    elif isinstance(value, int) and not isinstance(value, bool):
        assert -MAX_COUNT <= value <= MAX_COUNT
    elif isinstance(value, float):
        assert math.isfinite(value)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(valid_spec_data, spec_data, json_values))
def test_parse_returns_a_json_safe_spec_or_raises_invalid_spec(data):
    try:
        spec = JobSpec.parse(data)
    except InvalidSpec as e:
        assert str(e).startswith("invalid job spec: ")
        assert "\n" not in str(e)
        return
    wire = spec.wire()
    _within_json({k: v for k, v in wire.items() if k != "options"})  # options are the strategy's to bound
    assert JobSpec.parse(json.loads(json.dumps(wire))) == spec


@settings(max_examples=100, deadline=None)
@given(data=valid_spec_data)
def test_every_number_in_range_is_taken(data):
    assert JobSpec.parse(data).wire() == JobSpec.parse(json.loads(json.dumps(data))).wire()
