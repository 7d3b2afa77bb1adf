"""Content parts, pure: what a task's images and files must be, and how they read."""

from __future__ import annotations

import base64
import re

import pytest

from covey import BadPart, File, Image, InvalidSpec, JobSpec
from covey.parts import MAX_BYTES, data_url, decoded, described, images, marked, normalise, pixels, readable, shown
from tests.images import png

PICTURE = png(5, 2)
URL = data_url(PICTURE, "image/png")
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xc0\x00\x11\x08\x00\x07\x00\x0b\x03"
GIF = b"GIF89a\x0c\x00\x06\x00" + b"\x00" * 20


def test_an_image_is_described_by_its_type_pixels_and_bytes_never_its_base64():
    assert described(URL) == f"[image image/png 5x2, {len(PICTURE)} bytes]"
    assert described("https://example.com/a.png") == "[image https://example.com/a.png]"
    assert (pixels(JPEG), pixels(GIF), pixels(b"\x89PNG short")) == ((11, 7), (12, 6), None)
    big = data_url(GIF + b"\x00" * 4096, "image/gif")
    assert described(big) == "[image image/gif 12x6, 4.0 KiB]"


def test_messages_read_as_text_with_each_image_described():
    content = [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": URL}}]
    assert readable(content) == f"Look: [image image/png 5x2, {len(PICTURE)} bytes]"
    assert readable("plain") == "plain" and readable(None) == ""
    messages = [{"role": "user", "content": content}, {"role": "tool", "content": "x"}]
    assert images(messages) == [URL]
    assert shown(messages)[0]["content"][1]["image_url"]["url"] == described(URL)
    assert readable(shown(messages)[0]["content"]) == readable(content)  # a transcript's, read again
    assert messages[0]["content"][1]["image_url"]["url"] == URL  # left as it was
    digested, count = marked(messages)
    assert count == 1 and URL not in str(digested) and digested == marked(messages)[0]


def test_base64_is_checked_and_bounded_before_it_is_decoded():
    assert decoded(base64.b64encode(b"hi").decode(), "f") == (None, b"hi")
    assert decoded("data:text/plain;charset=utf-8;base64,aGk=", "f") == ("text/plain", b"hi")
    with pytest.raises(BadPart, match="f: not base64"):
        decoded("aGk=!", "f")
    with pytest.raises(BadPart, match="larger than 256 KiB"):
        decoded(base64.b64encode(b"x" * (MAX_BYTES + 1)).decode(), "f")
    with pytest.raises(BadPart, match="larger than 256 KiB"):
        decoded("A" * (MAX_BYTES * 2 + 4), "f")  # refused by its length alone
    wrapped = base64.encodebytes(b"x" * MAX_BYTES).decode()  # MIME's lines of 76
    assert len(decoded(wrapped, "f")[1]) == MAX_BYTES


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a\\b", "a\nb", " "])
def test_a_path_that_would_leave_the_workspace_or_break_a_line_is_refused(path):
    with pytest.raises(BadPart):
        normalise(path)


def test_image_and_file_check_what_they_hold():
    with pytest.raises(BadPart, match="not a PNG"):
        Image(data=b"hello")
    with pytest.raises(BadPart, match="one of them"):
        Image()
    with pytest.raises(BadPart, match="escapes"):
        File("../x", "y")
    assert Image(data=PICTURE, detail="low").part() == {
        "type": "image_url",
        "image_url": {"url": URL, "detail": "low"},
    }
    assert File("a.txt", "hi").part() == {"type": "file", "file": {"filename": "a.txt", "file_data": "aGk="}}


def test_a_task_of_parts_keeps_its_text_in_task_and_the_rest_in_parts():
    spec = JobSpec(task=["Compare", Image(url="https://example.com/a.png"), "these.", File("a.txt", "hi")])
    assert spec.task == "Compare\n\nthese."
    assert [p.type for p in spec.parts] == ["image_url", "file"]
    again = JobSpec.parse(spec.wire())  # the wire: text in task, images and files in parts
    assert again.parts == spec.parts and spec.wire()["parts"][1]["file"] == {"filename": "a.txt", "file_data": "aGk="}
    as_openai = [{"type": "text", "text": "Look."}, {"type": "image_url", "image_url": {"url": URL}}]
    assert JobSpec.parse({"task": as_openai}).parts[0].image_url.url == URL


def test_parts_that_are_no_list_are_refused_not_crashed_on():
    with pytest.raises(InvalidSpec, match="parts: Input should be a valid list"):
        JobSpec.parse({"task": ["x", File("a", "1")], "parts": 5})
    with pytest.raises(InvalidSpec, match="task: Input should be a valid string"):
        JobSpec.parse({"task": {"type": "text", "text": "x"}})


@pytest.mark.parametrize(
    ("task", "said"),
    [
        ([{"type": "audio", "audio": {}}], "task.0: Input tag 'audio' found using 'type' does not match"),
        ([Image(data=PICTURE)], "task: give it some text beside its images and files"),
        (["x", {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}], "not a PNG, JPEG"),
        (["x", {"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}], "give an http(s) URL"),
        (["x", {"type": "file", "file": {"filename": "../x", "file_data": "aGk="}}], "path '../x' escapes"),
        (["x", {"type": "file", "file": {"filename": "a", "file_data": "%%"}}], "file_data: not base64"),
        (["x", File("a", "1"), File("a", "2")], "two files at one path: 'a'"),
        (["x", *[File(f"f{i}", "1") for i in range(9)]], "parts: List should have at most 8 items"),
        (["x", *[File(f"f{i}", b"1" * MAX_BYTES) for i in range(5)]], "larger than 1024 KiB together"),
    ],
)
def test_a_bad_part_is_refused_at_the_wire_naming_it(task, said):
    with pytest.raises(InvalidSpec, match="invalid job spec: .*" + re.escape(said)):
        JobSpec.parse({"task": task})
