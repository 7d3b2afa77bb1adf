"""Reading the TOML files a worker is pointed at (``COVEY_MODELS``, ``COVEY_MCP``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from covey import inputs
from covey.errors import CoveyError


def read_toml(path: Path, what: str, error: type[CoveyError]) -> dict[str, Any]:
    """The file's tables; ``error`` with one line naming the file when it cannot be read,
    is larger than ``inputs.MAX_CONFIG_BYTES``, is not UTF-8 or is not TOML (``what``
    names the file for the user: "the models file (COVEY_MODELS)")."""
    try:
        return tomllib.loads(inputs.read_text(path, str(path), inputs.MAX_CONFIG_BYTES))
    except OSError as e:
        raise error(f"{path}: cannot read {what}: {e.strerror}") from e
    except inputs.Unreadable as e:
        raise error(str(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from e
