"""The example agents (examples/agents, a package a team would install beside its
workers) importable here as they are on a worker started with them on its path."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
