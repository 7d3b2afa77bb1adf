"""Every benchmark, before and after a change, in one command that rewrites BENCHMARKS.md.

Run from the repo root: ``python bench/all.py [--before REV] [--only fanout,memory]``.

Each script in ``BENCHES`` runs as its own process and writes its figures as JSON
(``--json``). With ``--before``, the same scripts also run in a worktree of REV
into which this ``bench/`` is copied: they measure that older covey the same way,
and each script's ``section(after, before)`` sets the two side by side. The two
trees alternate script by script (one goes first, then the other), so a slow
spell on this shared machine does not fall on one side only. The worktree is
removed at the end, and each script stops whatever it started. ``--only`` runs
the scripts named and rewrites their sections alone; every section says the
commit it measured.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# name -> the script's arguments. Sizes keep the whole run within about half an hour.
BENCHES: dict[str, list[str]] = {
    "capacity": [],
    "fairness": [],
    "fanout": ["--repeats", "5"],
    "ledger": [],
    "mcp_tools": [],
    "priority": [],
    "memory": [],
    "model_call": [],
    "reservations": [],
    "scale": ["--repeats", "1"],
    "sdk_agents": [],
    "sweep": ["--samples", "500,2000", "--rounds", "3"],
    "telemetry": ["--repeats", "15"],
    "tool_surface": [],
    "tools": [],
    "transcripts": [],
    "ui_pages": ["--rounds", "5"],
    "weights": [],
}


def worktree(rev: str, into: Path) -> Path:
    """REV checked out at ``into`` with this tree's ``bench/`` in place of its own."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(into), rev],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(into / "bench", ignore_errors=True)
    shutil.copytree(ROOT / "bench", into / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def run(tree: Path, name: str, out: Path) -> dict | None:
    """One script on one tree: its figures, or None when it failed (its output says why)."""
    path = out / f"{tree.name}-{name}.json"
    print(f"running bench/{name}.py on {tree}", file=sys.stderr)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, f"bench/{name}.py", *BENCHES[name], "--json", str(path)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    took = f"{time.monotonic() - started:.0f} s"
    if done.returncode != 0:
        print(f"bench/{name}.py on {tree} failed (exit {done.returncode}) after {took}", file=sys.stderr)
        return None
    print(f"bench/{name}.py on {tree} took {took}", file=sys.stderr)
    return json.loads(path.read_text())


def section(name: str, after: dict | None, before: dict | None, rev: str | None) -> str:
    """The script's section, saying which commit it measured and when; one that failed
    on this tree, or on REV, says so instead of leaving its figures out silently."""
    if after is None:
        text = f"## `bench/{name}.py`\n\nIt failed on this commit in this run: no figures.\n"
    else:
        text = importlib.import_module(f"bench.{name}").section(after, before).rstrip("\n") + "\n"
        if rev is not None and before is None:
            text += f"\nIt failed on commit `{rev}` in this run: no before figures.\n"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    command = "python bench/all.py" + (f" --before {rev}" if rev else "")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    return text + f"\n_Measured by `{command}` at commit `{head.stdout.strip()}` on {today}._\n"


def sections_in(page: str) -> dict[str, str]:
    """The sections of a BENCHMARKS.md in its order: a script's (by the script its
    heading names) under the script's name, to be rewritten when it runs again; any
    other (a profile's, written by hand) under its heading, kept as it is."""
    found: dict[str, str] = {}
    for chunk in re.split(r"(?m)^(?=## )", page)[1:]:
        heading = chunk.splitlines()[0]
        named = re.search(r"`bench/(\w+)\.py`", heading)
        found[named.group(1) if named and named.group(1) in BENCHES else heading] = chunk.rstrip("\n") + "\n"
    return found


def document(sections: dict[str, str]) -> str:
    body = "\n".join(sections.values())
    return f"""# Benchmarks

The benchmarks' figures here come from `python bench/all.py --before REV`, run
from the repo root ({os.cpu_count()} cores, Python {platform.python_version()}, a machine shared with
other work): it runs each script of `bench/` on this tree and on commit REV and
writes its section, which says the commit it measured and when. `--only NAMES`
rewrites only those sections; the profiles' sections, which no script writes,
give the commands that made them and stay as they are. Each script starts its
own redis-server and workers and stops them. Seconds depend on the machine and
the moment; compare the ratios, which each benchmark takes from rounds run side
by side.

{body}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV", help="also measure this commit, for before/after figures")
    parser.add_argument("--only", help=f"comma-separated, of {', '.join(BENCHES)}")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(BENCHES)
    unknown = set(names) - set(BENCHES)
    if unknown:
        parser.error(f"unknown benchmark {', '.join(sorted(unknown))}; choose from {', '.join(BENCHES)}")

    with tempfile.TemporaryDirectory(prefix="covey-bench-all-") as scratch:
        out = Path(scratch)
        older = worktree(args.before, out / "before") if args.before else None
        try:
            page = ROOT / "BENCHMARKS.md"
            sections = sections_in(page.read_text()) if page.exists() else {}
            for i, name in enumerate(names):
                trees = [ROOT] if older is None else [ROOT, older][:: 1 if i % 2 else -1]
                figures = {tree: run(tree, name, out) for tree in trees}
                sections[name] = section(name, figures[ROOT], figures.get(older), args.before)
                # Written as it goes: a run cut short keeps the figures it has, and the
                # sections it did not reach keep theirs.
                page.write_text(document(sections))
        finally:
            if older is not None:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(older)], capture_output=True
                )
    print("wrote BENCHMARKS.md", file=sys.stderr)


if __name__ == "__main__":
    main()
