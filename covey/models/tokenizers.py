"""A model's own tokenizer, for an exact count of the prompt its first call sends.

The models file names one per model (``tokenizer = "tokenizer.json"``,
``tokenizer = "tiktoken:o200k_base"`` or ``tokenizer = "server"``: the endpoint's
own, ``covey.models.server_tokenizer``); a model without one is bounded by its
bytes (``covey.models.tokens``). Counting runs over the same compact JSON of
messages and tools that the byte bound does: its keys, quotes and braces cost
more tokens than the few an endpoint's chat template puts around each message,
so the count stays above what the endpoint bills while within a few tokens of it.
A tokenizer is loaded once, when the catalog is built, and refused there with one
line if it cannot be: a worker never starts with a count it cannot make.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Protocol

from covey.errors import CoveyError

TIKTOKEN_PREFIX = "tiktoken:"
# Tokens an endpoint adds to a request beyond its messages' JSON: the reply's priming.
FRAMING_TOKENS = 8
SIM_TOKENIZER = "sim"  # the sim's own billing: four characters a token, a byte each with [sim:bill bytes]
_SIM_BYTES = "[sim:bill bytes]"


class TokenizerError(CoveyError, ValueError):
    """A ``tokenizer`` entry that does not load on this worker; says what to fix."""


class Tokenizer(Protocol):
    name: str
    overhead: int  # tokens the endpoint bills beyond the count of the request's JSON
    # The endpoint counting over HTTP (covey.models.server_tokenizer): a request per count,
    # and blind to the preamble a server's template adds for tools.
    remote: bool

    def count(self, text: str) -> int:
        """How many tokens ``text`` is, as the model's tokenizer makes them."""
        ...


class HuggingFace:
    """A Hugging Face ``tokenizer.json``, through the ``tokenizers`` library."""

    overhead = FRAMING_TOKENS
    remote = False

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer as HFTokenizer  # a compiled extension: loaded only when named
        except ImportError as e:
            raise TokenizerError(f"tokenizer {path}: pip install 'covey[tokenizers]'") from e
        try:
            self._tokenizer = HFTokenizer.from_file(str(path))
        except Exception as e:  # the library raises a bare Exception for a missing or malformed file
            raise TokenizerError(f"tokenizer {path}: cannot be loaded as a tokenizer.json: {e}") from e
        self.name = str(path)

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


class Tiktoken:
    """A tiktoken encoding, when it loads on this machine (from tiktoken's cache or a plugin)."""

    overhead = FRAMING_TOKENS
    remote = False

    def __init__(self, encoding: str) -> None:
        try:
            import tiktoken
        except ImportError as e:
            raise TokenizerError(f"tokenizer {TIKTOKEN_PREFIX}{encoding}: pip install 'covey[tiktoken]'") from e
        try:
            self._encoding = tiktoken.get_encoding(encoding)
        except Exception as e:  # unknown name, or a download this machine cannot make
            raise TokenizerError(f"tokenizer {TIKTOKEN_PREFIX}{encoding}: does not load on this worker: {e}") from e
        self.name = TIKTOKEN_PREFIX + encoding

    def count(self, text: str) -> int:
        # Text that spells a special token is counted as the text it is, as an endpoint reads a message.
        return len(self._encoding.encode(text, disallowed_special=()))


class SimTokenizer:
    """The built-in sim's count, exactly as it bills (``covey.models.sim.directives``):
    four characters a token, or a token a byte for a prompt that asks ``[sim:bill bytes]``.
    ``[sim:bill over]`` stands for a provider over-reporting, which no count foresees.
    The sim bills the JSON alone, so nothing is added for framing."""

    name = SIM_TOKENIZER
    overhead = 0
    remote = False

    def count(self, text: str) -> int:
        if _SIM_BYTES in text:
            return len(text.encode("utf-8", "surrogatepass"))
        return math.ceil(len(text) / 4)


def load(entry: str, relative_to: Path | None = None) -> Tokenizer:
    """The tokenizer a models-file entry names: ``tiktoken:NAME``, or a ``tokenizer.json``
    path (relative to the models file's folder)."""
    if entry.startswith(TIKTOKEN_PREFIX):
        return Tiktoken(entry.removeprefix(TIKTOKEN_PREFIX))
    path = Path(entry).expanduser()
    if not path.is_absolute() and relative_to is not None:
        path = relative_to / path
    if not path.is_file():
        raise TokenizerError(f"tokenizer {path}: no such file (a tokenizer.json, or tiktoken:ENCODING)")
    return HuggingFace(path)
