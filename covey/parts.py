"""Content parts: the images and files beside a task's text, as the OpenAI chat format has them.

A task may be a list of parts, as a chat message's content is: ``{"type": "text"}``,
``{"type": "image_url", "image_url": {"url": ...}}`` (an https URL, or a ``data:``
URL of the image's bytes) and ``{"type": "file", "file": {"filename", "file_data"}}``.
An image reaches the model as a part; a file goes into the job's workspace and the
model reads a note naming it. From Python, ``Image`` and ``File`` build the parts,
and a tool returns one to show the model an image or to write a file.

Every image and file is checked where it enters (base64 that decodes, at most
``MAX_BYTES``, an image that is a PNG, JPEG, GIF or WebP, a path that stays in the
workspace), so a bad one is refused at the client or the wire, never in a worker.
A transcript shows each image by its type, size and pixels (``described``), never
its base64.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import posixpath
import re
import struct
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from covey.errors import CoveyError

KIB = 1024
# One image or file, decoded: the workspace's cap per file, which keeps a runaway
# agent (or a careless client) from filling Redis; an image also travels in each
# model request and in its agent's checkpoint.
MAX_BYTES = 256 * KIB
MAX_PARTS = 8  # images and files of one task
MAX_TOTAL_BYTES = 1024 * KIB  # of one task's images and files together: its Celery message stays small
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what OpenAI's vision models take
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+-]+)*;base64,(?P<data>.*)", re.S)
_WEB_URL = re.compile(r"https?://[^\s]+")
# A line of a tool's text naming an image (a workspace path or an http(s) URL) that
# the agent's next model call shows (``covey.worker.attachments``), and how it is found.
IMAGE_LINE = "[image: {}]"
IMAGE_LINES = re.compile(r"^\[image: (.+)\]$", re.M)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class BadPart(CoveyError, ValueError):
    """An image, file or path that cannot be used; one line saying why."""


def normalise(path: str, root: str = "") -> str:
    """``path`` relative to ``root``, as a clean relative path, or ``BadPart``."""
    if not isinstance(path, str) or not path.strip():
        raise BadPart("path is empty")
    if path.startswith("/") or "\\" in path or "\x00" in path or "\n" in path:
        raise BadPart(f"path {path!r} must be relative, on one line, with / separators")
    joined = posixpath.normpath(posixpath.join(root or ".", path))
    inside = root == "" or joined.startswith(root + "/")
    if joined in (".", "") or joined.startswith("..") or not inside:
        raise BadPart(f"path {path!r} escapes {root or 'the workspace'}")
    return joined


def decoded(data: str, what: str) -> tuple[str | None, bytes]:
    """The media type (None when bare base64 says none) and bytes of a ``data:`` URL
    or of bare base64, at most ``MAX_BYTES``; ``BadPart`` naming ``what`` otherwise."""
    found = _DATA_URL.fullmatch(data)
    media, text = (found["type"], found["data"]) if found else (None, data)
    if len(text) > 2 * MAX_BYTES:  # refused before decoding what is too large even line-wrapped
        raise BadPart(f"{what}: larger than {MAX_BYTES // KIB} KiB, the most covey takes of one image or file")
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise BadPart(f"{what}: not base64 (give a data: URL, or the bytes base64-encoded)") from None
    if len(raw) > MAX_BYTES:
        raise BadPart(f"{what}: larger than {MAX_BYTES // KIB} KiB, the most covey takes of one image or file")
    return media, raw


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def image_type(data: bytes) -> str | None:
    """The image type of ``data`` by its first bytes, whatever a name or header claims."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def tool_image(call_id: str, media_type: str, n: int = 0) -> str:
    """Where the ``n``-th image of a tool call is kept below its agent's folder: named
    by the call, so a call run again after a crash writes the same file."""
    return f"images/{_UNSAFE.sub('_', call_id)}{f'-{n}' if n else ''}.{media_type.split('/')[1]}"


def image_bytes(url: str, what: str = "image") -> tuple[str, bytes]:
    """The type and bytes of a ``data:`` URL of an image; ``BadPart`` for anything else."""
    _, raw = decoded(url, what)
    kind = image_type(raw)
    if kind is None:
        raise BadPart(f"{what}: not a PNG, JPEG, GIF or WebP image")
    return kind, raw


def pixels(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF or JPEG, read from its header; None when unread."""
    try:
        if data.startswith(b"\x89PNG") and data[12:16] == b"IHDR":
            return struct.unpack(">II", data[16:24])
        if data[:3] == b"GIF":
            return struct.unpack("<HH", data[6:10])
        if data.startswith(b"\xff\xd8"):
            at = 2
            while at + 9 < len(data) and data[at] == 0xFF:
                marker, length = data[at + 1], struct.unpack(">H", data[at + 2 : at + 4])[0]
                if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
                    height, width = struct.unpack(">HH", data[at + 5 : at + 9])
                    return width, height
                at += 2 + length
    except struct.error:
        return None
    return None


def described(url: str) -> str:
    """An image as a person (and the sim) reads it: ``[image image/png 64x48, 1.2 KiB]``,
    or its URL; never its base64. One described already (a transcript's) stays as it is."""
    if url.startswith("[image "):
        return url
    if not url.startswith("data:"):
        return f"[image {url}]"
    try:
        kind, raw = image_bytes(url)
    except BadPart as e:
        return f"[image: {e}]"
    size = pixels(raw)
    shape = f" {size[0]}x{size[1]}" if size else ""
    return f"[image {kind}{shape}, {_size(len(raw))}]"


def _size(count: int) -> str:
    return f"{count} bytes" if count < KIB else f"{count / KIB:.1f} KiB"


# --- the wire: parts as the OpenAI chat format has them ------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ImageURL(_Strict):
    url: str = Field(description="an http(s) URL, or a data: URL of a PNG, JPEG, GIF or WebP")
    detail: Literal["auto", "low", "high"] | None = None

    @field_validator("url")
    @classmethod
    def _usable(cls, url: str) -> str:
        if url.startswith("data:"):
            image_bytes(url)
        elif not _WEB_URL.fullmatch(url) or len(url) > 2048:
            raise ValueError("give an http(s) URL of at most 2048 characters, or a data: URL of the image")
        return url


class ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: ImageURL


class FileData(_Strict):
    filename: str = Field(description="the file's path in the job's workspace")
    file_data: str = Field(description="its bytes: a data: URL, or base64")

    @field_validator("filename")
    @classmethod
    def _in_workspace(cls, path: str) -> str:
        return normalise(path)

    @field_validator("file_data")
    @classmethod
    def _bytes(cls, data: str) -> str:
        decoded(data, "file_data")
        return data

    def content(self) -> bytes:
        return decoded(self.file_data, self.filename)[1]


class FilePart(_Strict):
    type: Literal["file"]
    file: FileData


Part = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]
Attached = Annotated[ImagePart | FilePart, Field(discriminator="type")]


# --- from Python: what a task lists and a tool returns ----------------------------


@dataclass(frozen=True)
class Image:
    """An image for the model: its bytes (``data``, the type read from them) or a ``url``.
    In a task's list it is a part; returned by a tool, the model sees it in its next call."""

    data: bytes | None = None
    url: str | None = None
    detail: Literal["auto", "low", "high"] | None = None

    def __post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise BadPart("an Image takes its data or its url, one of them")
        if self.data is not None and image_type(self.data) is None:
            raise BadPart("Image data is not a PNG, JPEG, GIF or WebP image")
        if self.data is not None and len(self.data) > MAX_BYTES:
            raise BadPart(f"Image data is larger than {MAX_BYTES // KIB} KiB, the most covey takes of one image")

    def part(self) -> dict[str, Any]:
        url = self.url if self.data is None else data_url(self.data, image_type(self.data) or "")
        image: dict[str, Any] = {"url": url} if self.detail is None else {"url": url, "detail": self.detail}
        return ImagePart(type="image_url", image_url=ImageURL.model_validate(image)).model_dump(exclude_none=True)


@dataclass(frozen=True)
class File:
    """A file for the job's workspace at ``path``: text or bytes. In a task's list it
    is written before the root runs; returned by a tool, below the agent's own folder."""

    path: str
    data: bytes | str

    def __post_init__(self) -> None:
        normalise(self.path)
        if len(self.content()) > MAX_BYTES:
            raise BadPart(f"file {self.path}: larger than {MAX_BYTES // KIB} KiB, the most covey takes of one file")

    def content(self) -> bytes:
        return self.data.encode() if isinstance(self.data, str) else self.data

    def part(self) -> dict[str, Any]:
        data = base64.b64encode(self.content()).decode()
        return {"type": "file", "file": {"filename": self.path, "file_data": data}}


# --- reading messages that hold parts ---------------------------------------------


def readable(content: Any) -> str:
    """Message content as text: a string as it is; parts as their text, each image
    ``described`` and each file named."""
    if not isinstance(content, list):
        return "" if content is None else str(content)
    said = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            said.append(str(part.get("text", "")))
        elif kind == "image_url":
            said.append(described(str((part.get("image_url") or {}).get("url", ""))))
        elif kind == "file":
            said.append(f"[file {(part.get('file') or {}).get('filename', '?')}]")
    return " ".join(said)


def images(value: Any) -> list[str]:
    """The URL of every image part in ``value`` (messages, or any JSON), in order."""
    found: list[str] = []
    _walk(value, found.append)
    return found


def shown(value: Any) -> Any:
    """``value`` (messages, or any JSON) with each image's ``data:`` URL ``described``,
    for what people read and for what bounds its tokens: never the base64."""
    return _walk(value, lambda url: None, described)


def marked(value: Any) -> tuple[Any, int]:
    """``value`` with each image's ``data:`` URL replaced by a digest of it, and how
    many images it holds: what a prompt's bound counts and compares, each image
    costing a bound of its own instead of its base64."""
    found: list[str] = []
    digest = lambda url: "image:" + hashlib.sha256(url.encode()).hexdigest()[:24]  # noqa: E731
    return _walk(value, found.append, digest), len(found)


def _walk(value: Any, seen: Any, replace: Any = None) -> Any:
    if isinstance(value, list):
        return [_walk(v, seen, replace) for v in value]
    if not isinstance(value, dict):
        return value
    image = value.get("image_url") if value.get("type") == "image_url" else None
    if isinstance(image, dict) and isinstance(image.get("url"), str):
        seen(image["url"])
        if replace is not None and image["url"].startswith("data:"):
            return {**value, "image_url": {**image, "url": replace(image["url"])}}
        return value
    return {k: _walk(v, seen, replace) for k, v in value.items()}
