"""Soak the suite: run it N times, two runs at once (each on every core, so the machine is loaded twice over), and
report every test that failed in any run (``make soak N=6``). Timing margins turn into failures under load: a test
that fails here is a defect to find, not one to retry.

Each run is the whole suite as `make test` runs it, in this tree; runs share nothing but the heavy tools' cache
(tests/support/heavy_tools.py), which is safe to share.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import repeat
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTCOME = re.compile(r"^(FAILED|ERROR) (\S+)", re.MULTILINE)
SUMMARY = re.compile(r"^(?:=+ )?(\d+ (?:passed|failed|error).*) in ([0-9.]+)s", re.MULTILINE)
PYTEST = ("-n", "auto", "--dist", "loadgroup", "-q", "-p", "no:cacheprovider", "-rfE")


def one_run(number: int, logs: Path) -> tuple[int, int, list[str], str]:
    log = logs / f"run-{number}.log"
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *PYTEST],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    text = log.read_text()
    summary = SUMMARY.findall(text)
    line = f"{summary[-1][0]} in {time.monotonic() - started:.0f} s" if summary else "no summary"
    return number, done.returncode, sorted({f"{kind} {test}" for kind, test in OUTCOME.findall(text)}), line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=int, nargs="?", default=6, help="whole-suite runs (two at a time)")
    parser.add_argument("--logs", type=Path, default=ROOT / ".cache" / "soak", help="one log per run here")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    failures: Counter[str] = Counter()
    bad_runs = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for number, returncode, failed, line in pool.map(one_run, range(1, args.runs + 1), repeat(args.logs)):
            print(f"run {number}: rc {returncode}: {line}", flush=True)
            failures.update(failed)
            bad_runs += returncode != 0
    print(f"{args.runs} runs, two at once: {bad_runs} failed; logs in {args.logs}")
    for test, count in failures.most_common():
        print(f"  {count}x {test}")
    return 1 if bad_runs else 0


if __name__ == "__main__":
    raise SystemExit(main())
