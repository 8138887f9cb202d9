"""Runs every benchmark and writes docs/benchmarks.md (``make bench``)."""

from __future__ import annotations

import importlib
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("bench.synth", "bench.sync", "bench.ops")


def main() -> None:
    sys.path.insert(0, str(ROOT / "lambdas"))
    parts = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
        f"{platform.machine()}. Each figure stands beside a baseline measured in the same run, because these "
        "machines are noisy: compare ratios, not absolute times.",
        "",
    ]
    for name in SECTIONS:
        print(f"running {name} ...", file=sys.stderr)
        parts.append(importlib.import_module(name).run())
    (ROOT / "docs" / "benchmarks.md").write_text("\n".join(parts).rstrip() + "\n")
    print((ROOT / "docs" / "benchmarks.md").read_text())


if __name__ == "__main__":
    main()
