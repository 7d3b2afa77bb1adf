"""Run one test many times and tally the outcomes, for RELIABILITY.md (not run in CI).

    PYTHONPATH=$PWD python bench/trials.py 50 \\
        tests/integration/test_lost_messages.py::test_a_waiting_parent_delivered_again_makes_no_answer_up

A run that fails is a wrong result (the test asserts the answer, the ledger and the
tree); one that outlives ``--timeout`` seconds is a hang. ``--figure NAME`` gathers
the lines ``NAME: <number>`` the passed runs print, and gives their distribution:

    PYTHONPATH=$PWD python bench/trials.py 7 --figure "takeover seconds" --timeout 600 \\
        tests/integration/test_takeover.py::test_a_killed_worker_s_tasks_go_on_in_seconds_with_default_settings
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=int)
    parser.add_argument("test")
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--figure", help="gather the numbers passed runs print as '<figure>: <number>'")
    args = parser.parse_args()
    tally = {"passed": 0, "failed": 0, "hung": 0}
    figures: list[float] = []
    for run in range(1, args.runs + 1):
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-rP", "-p", "no:cacheprovider", args.test],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            outcome = "passed" if proc.returncode == 0 else "failed"
            if outcome == "passed" and args.figure:
                figures += [float(n) for n in re.findall(rf"^{re.escape(args.figure)}: ([0-9.]+)", proc.stdout, re.M)]
        except subprocess.TimeoutExpired:
            outcome = "hung"
        tally[outcome] += 1
        print(f"run {run}: {outcome} in {time.monotonic() - started:.0f}s", flush=True)
        if outcome == "failed":
            print(proc.stdout[-2000:], flush=True)
    print(" ".join(f"{k}={v}" for k, v in tally.items()), flush=True)
    if figures:
        print(f"{args.figure}: {len(figures)} values; {distribution(figures)}", flush=True)


def distribution(values: list[float]) -> str:
    ordered = sorted(values)
    deciles = statistics.quantiles(ordered, n=10) if len(ordered) > 1 else ordered * 9
    return (
        f"min {ordered[0]:.2f}, median {statistics.median(ordered):.2f}, p90 {deciles[8]:.2f}, max {ordered[-1]:.2f}; "
        f"all: {' '.join(f'{v:.2f}' for v in ordered)}"
    )


if __name__ == "__main__":
    main()
