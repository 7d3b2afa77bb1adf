"""The plain text every layer shows people: a text cut to its place, a table."""

from __future__ import annotations

from covey import wire


def test_a_text_longer_than_its_place_keeps_its_start_and_an_ellipsis_within_the_length():
    assert wire.cut("short", 5) == "short"
    assert wire.cut("a longer text", 8) == "a longer"[:7] + "…"
    assert len(wire.cut("x" * 100, 80)) == 80


def test_a_table_pads_columns_to_their_widest_cell_and_shows_none_as_a_dash():
    assert wire.table(["a", "long header"], [("wide cell", None), (1, 2)]).splitlines() == [
        "a          long header",
        "wide cell  -",
        "1          2",
    ]
