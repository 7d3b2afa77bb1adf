"""Run one test many times and tally the outcomes, for RELIABILITY.md (not run in CI).

    PYTHONPATH=$PWD python bench/trials.py 50 \\
        tests/integration/test_lost_messages.py::test_a_waiting_parent_delivered_again_makes_no_answer_up

A run that fails is a wrong result (the test asserts the answer, the ledger and the
tree); one that outlives ``--timeout`` seconds is a hang."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", type=int)
    parser.add_argument("test")
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    tally = {"passed": 0, "failed": 0, "hung": 0}
    for run in range(1, args.runs + 1):
        started = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", args.test],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            outcome = "passed" if proc.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            outcome = "hung"
        tally[outcome] += 1
        print(f"run {run}: {outcome} in {time.monotonic() - started:.0f}s", flush=True)
        if outcome == "failed":
            print(proc.stdout[-2000:], flush=True)
    print(" ".join(f"{k}={v}" for k, v in tally.items()), flush=True)


if __name__ == "__main__":
    main()
