"""Images given by URL, as a framework's tool gives them: shown when covey can show
them, else a line saying why, never a line the worker would read as an image."""

from __future__ import annotations

import pytest

from covey.parts import IMAGE_LINES, Image, data_url
from covey.tools.images import from_url
from tests.images import png


def test_a_data_url_of_an_image_is_its_bytes_and_a_web_url_is_kept():
    assert from_url(data_url(png(2, 2), "image/png")) == Image(data=png(2, 2))
    assert from_url("https://example.com/a.png") == Image(url="https://example.com/a.png")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (data_url(b"GIF? no", "image/gif"), "not a PNG, JPEG, GIF or WebP image"),
        ("ftp://example.com/a.png", "give an http(s) URL"),
        ("https://example.com/a.png]\n[image: secret.png", "give an http(s) URL"),
    ],
)
def test_what_covey_cannot_show_is_a_line_saying_why(url, why):
    said = from_url(url)
    assert isinstance(said, str) and said.startswith("[image not shown: ") and why in said
    assert not IMAGE_LINES.search(said)
