"""A streamed reply is read no further than the tokens reserved for it."""

from __future__ import annotations

import itertools

import pytest

from covey.models.replies import ToolCall
from covey.models.stream import StreamTimeout, read


def delta(content=None, finish=None, calls=None):
    d = {} if content is None else {"content": content}
    if calls is not None:
        d["tool_calls"] = calls
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


USAGE = {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


def test_a_reply_within_its_cap_is_read_whole_with_the_servers_usage():
    got = read([delta("he"), delta("ll"), delta("o"), delta(finish="stop"), USAGE], cap=3, deadline=1e18)
    assert (got.reply.content, got.reply.finish_reason, got.cut) == ("hello", "stop", False)
    assert got.received == 3 and got.usage == USAGE["usage"]


def test_a_server_that_honours_the_cap_is_not_cut_at_it():
    got = read([delta("a"), delta("b"), delta(finish="length"), USAGE], cap=2, deadline=1e18)
    assert (got.reply.content, got.reply.finish_reason, got.cut) == ("ab", "length", False)


def test_a_server_that_ignores_the_cap_is_cut_at_it_and_read_no_further():
    endless = (delta("x") for _ in itertools.count())
    got = read(endless, cap=5, deadline=1e18)
    assert (got.reply.content, got.reply.finish_reason, got.cut, got.received) == ("xxxxx", "length", True, 5)
    assert next(endless) == delta("x")  # the stream was left where it passed the cap


def test_a_tokenizer_counts_what_each_chunk_carries():
    got = read([delta("one two"), delta(" three four")], cap=3, deadline=1e18, count=lambda t: len(t.split()))
    assert (got.reply.content, got.cut, got.received) == ("one two", True, 3)


def test_tool_calls_are_assembled_from_their_deltas_and_count_as_generated():
    calls = [
        delta(calls=[{"index": 0, "id": "c1", "function": {"name": "calculator", "arguments": ""}}]),
        delta(calls=[{"index": 0, "function": {"arguments": '{"expression": '}}]),
        delta(calls=[{"index": 0, "function": {"arguments": '"2+2"}'}}]),
        delta(calls=[{"index": 1, "id": "c2", "function": {"name": "finish", "arguments": "{}"}}]),
        delta(finish="tool_calls"),
    ]
    got = read(calls, cap=100, deadline=1e18)
    assert got.reply.content is None and got.reply.finish_reason == "tool_calls" and got.received == 4
    assert got.reply.tool_calls == [
        ToolCall(id="c1", name="calculator", arguments='{"expression": "2+2"}'),
        ToolCall(id="c2", name="finish", arguments="{}"),
    ]


def test_a_stream_still_going_at_its_deadline_times_out():
    clock = iter([0.0, 1.0, 2.0, 3.0]).__next__
    with pytest.raises(StreamTimeout, match="still streaming after 2 tokens"):
        read([delta("a"), delta("b"), delta("c")], cap=10, deadline=1.5, clock=clock)


@pytest.mark.parametrize(
    "chunks, error",
    [
        ([USAGE], "no choices"),
        ([[1, 2]], "a stream chunk is a list, not an object"),
        ([{"choices": "x"}], "choices is a str, not a list"),
        ([delta(42)], "content is a int, not text"),
        ([{"choices": [{"delta": "hi"}]}], "delta is a str, not an object"),
        ([delta(calls="calculator")], "tool_calls is a str, not a list"),
        ([delta(calls=[{"index": "0", "function": {}}])], "tool call index is a str, not a number"),
        ([delta(calls=[{"index": 0, "function": {"arguments": {"a": 1}}}])], "tool call arguments is a dict"),
    ],
)
def test_a_chunk_of_the_wrong_shape_is_an_error_naming_it(chunks, error):
    with pytest.raises((TypeError, ValueError), match=error):
        read(chunks, cap=10, deadline=1e18)


def test_without_a_tokenizer_a_chunk_counts_a_token_or_its_non_ascii_bytes():
    got = read([delta("hello"), delta("é"), delta("🐉")], cap=100, deadline=1e18)
    assert got.received == 1 + 2 + 4  # a dragon of three tokens, sent in one chunk, is never counted as fewer


def test_a_tool_name_repeated_in_every_delta_is_taken_once():
    repeated = [
        delta(calls=[{"index": 0, "id": "c1", "function": {"name": "answer", "arguments": piece}}])
        for piece in ['{"city"', ': "Paris"', "}"]
    ]
    got = read(repeated, cap=100, deadline=1e18)
    assert got.reply.tool_calls == [ToolCall(id="c1", name="answer", arguments='{"city": "Paris"}')]


def test_each_piece_of_text_is_handed_on_as_it_is_read_and_none_past_the_cap():
    shown = []
    endless = itertools.chain(
        [delta("he"), delta(calls=[{"index": 0, "id": "c", "function": {"name": "f"}}])],
        (delta("x") for _ in itertools.count()),
    )
    got = read(endless, cap=4, deadline=1e18, on_text=shown.append)
    assert shown == ["he", "x", "x"] and got.cut  # the tool call's name counts, and is no text
    assert "".join(shown) == got.reply.content
