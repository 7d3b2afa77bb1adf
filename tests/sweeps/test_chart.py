"""``summary.png`` at a grid's worth of configurations: the key beside the plot, every
number where it covers no other, and as many colours as configurations.

``python -m tests.sweeps.test_chart docs/sweep-summary.png`` draws the chart of the
same twenty configurations that docs/sweeps.md shows.
"""

from __future__ import annotations

import itertools
import random

import pytest

from covey.sweeps import chart
from covey.sweeps.records import Record, RecordUsage
from covey.sweeps.report import summarize

pytest.importorskip("matplotlib")

STRATEGIES = {"single": 40, "react": 1200, "plan_execute": 2400, "debate": 5200, "lats": 8800}  # tokens per sample


def twenty_configurations(samples: int = 40) -> list[Record]:
    """Two made-up models by five strategies by two budgets (rows no model produced,
    so named after none); ``model-a`` answers everything at the same cost, so ten of
    the points sit in pairs on the same spot."""
    rng = random.Random(20)
    records = []
    for model, (strategy, tokens), budget in itertools.product(["model-a", "model-b"], STRATEGIES.items(), ["s", "l"]):
        config = f"{model}/{strategy}/{budget}"
        right = 1.0 if model == "model-a" else rng.choice([0.6, 0.7, 0.75])
        for i in range(samples):
            records.append(
                Record(
                    unit=f"{config}/{i}",
                    sample_id=str(i),
                    config=config,
                    config_key=config,
                    status="completed",
                    score=float(rng.random() < right),
                    usage=RecordUsage(total_tokens=tokens if model == "model-a" else int(tokens * 1.4), cycles=2),
                    latency=1.0,
                )
            )
    return records


@pytest.fixture(scope="module")
def drawn():
    rows = summarize(twenty_configurations())
    return chart.figure(rows), rows


def test_the_key_names_every_configuration_beside_the_axes_never_over_them(drawn):
    fig, rows = drawn
    [ax] = fig.axes
    renderer = fig.canvas.get_renderer()
    key = ax.get_legend()
    frame, box, page = ax.get_window_extent(renderer), key.get_window_extent(renderer), fig.bbox
    assert box.x0 > frame.x1, "the key overlaps the plot"
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, "the key is cut off"
    entries = [t.get_text() for t in key.get_texts()]
    assert len(entries) == len(rows) == 20
    for number, (row, entry) in enumerate(zip(rows, entries, strict=True), start=1):
        assert entry.split()[:2] == [str(number), row.config]


def test_no_two_numbers_overlap_and_each_sits_in_the_plot(drawn):
    fig, _ = drawn
    [ax] = fig.axes
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    numbers = {t.get_text(): chart.extent(t, renderer) for t in ax.texts}
    assert sorted(numbers, key=int) == [str(n) for n in range(1, 21)]
    for (a, box), (b, other) in itertools.combinations(numbers.items(), 2):
        assert not box.overlaps(other), f"numbers {a} and {b} overlap"
    for n, box in numbers.items():
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, n


def test_twenty_configurations_get_twenty_colours_and_past_that_another_marker():
    assert len({chart.style(i)[0] for i in range(20)}) == 20
    assert len({chart.style(i) for i in range(40)}) == 40


def test_each_point_is_drawn_in_its_configurations_colour(drawn):
    fig, _ = drawn
    [ax] = fig.axes
    handles = ax.get_legend().legend_handles
    points = [line for line in ax.lines if line.get_marker() not in ("_", "None", None, "")]
    assert [p.get_color() for p in points] == [h.get_color() for h in handles]
    assert len({h.get_color() for h in handles}) == 20
