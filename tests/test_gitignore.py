"""What the README's commands leave in a clone stays out of git."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_sweep_directories_of_the_readme_are_ignored():
    """``covey sweep ... --out runs/arith`` writes results, summaries and charts there."""
    for path in ("runs/arith/results.jsonl", "runs/arith/summary.png"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, path
