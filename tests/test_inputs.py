"""What covey reads from a user's files and streams is bounded and checked to be UTF-8 (``covey.inputs``)."""

from __future__ import annotations

import io

import pytest

from covey import inputs
from covey.inputs import Unreadable


def test_a_stream_at_its_bound_is_read_and_one_byte_more_is_refused_naming_the_bound():
    assert inputs.read_stream(io.BytesIO(b"x" * 16), "standard input", 16) == "x" * 16
    with pytest.raises(Unreadable, match=r"^standard input: larger than 16 bytes, the most covey reads of it$"):
        inputs.read_stream(io.BytesIO(b"x" * 17), "standard input", 16)


def test_an_endless_stream_is_read_no_further_than_its_bound():
    with open("/dev/zero", "rb") as endless:
        with pytest.raises(Unreadable, match="larger than 1 MiB"):
            inputs.read_stream(endless, "/dev/zero", inputs.MIB)


def test_invalid_utf8_names_the_byte_and_its_offset():
    with pytest.raises(Unreadable, match=r"^task\.txt: not UTF-8 text: byte 0xff at offset 3$"):
        inputs.read_stream(io.BytesIO(b"n\xc3\xa9\xff"), "task.txt", 99)  # n, é (two bytes), then 0xff


def test_lines_count_offsets_across_lines_and_refuse_one_too_long(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_bytes(b'{"a": 1}\n\n{"b": "\xc3\xa9"}\n')
    assert list(inputs.lines(data, "d.jsonl", 64)) == [(1, '{"a": 1}\n'), (2, "\n"), (3, '{"b": "é"}\n')]

    data.write_bytes(b"ok\n" + b"\xff\n")
    with pytest.raises(Unreadable, match=r"^d\.jsonl: not UTF-8 text: byte 0xff at offset 3$"):
        list(inputs.lines(data, "d.jsonl", 64))

    data.write_bytes(b"short\n" + b"y" * 10 + b"\nlast")
    assert list(inputs.lines(data, "d.jsonl", 10)) == [(1, "short\n"), (2, "y" * 10 + "\n"), (3, "last")]
    data.write_bytes(b"short\n" + b"y" * 11 + b"\n")
    with pytest.raises(Unreadable, match=r"^d\.jsonl line 2: longer than 10 bytes, the most covey reads of a line$"):
        list(inputs.lines(data, "d.jsonl", 10))
