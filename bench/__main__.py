"""Runs every benchmark and writes docs/benchmarks.md (``make bench``)."""

from __future__ import annotations

import importlib
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = (
    "bench.proof",
    "bench.setup",
    "bench.synth",
    "bench.sync",
    "bench.ops",
    "bench.smoke",
    "bench.client",
)


def rerun(names: list[str]) -> None:
    """`python -m bench bench.sync ...`: run only those sections and replace them in docs/benchmarks.md (each
    section is the text from its `## ` heading to the next), keeping the others as they were measured."""
    sys.path.insert(0, str(ROOT / "lambdas"))
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text()
    for name in names:
        if name not in SECTIONS:
            raise SystemExit(f"unknown section {name!r}: one of {', '.join(SECTIONS)}")
        print(f"running {name} ...", file=sys.stderr)
        section = importlib.import_module(name).run().rstrip() + "\n"
        heading = section.splitlines()[0]
        start = text.index(heading + "\n")
        following = text.find("\n## ", start + len(heading))
        end = len(text) if following < 0 else following + 1
        text = text[:start] + section + ("\n" if following >= 0 else "") + text[end:]
    stamp = f"Rerun alone on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC: {', '.join(f'`{n}`' for n in names)}."
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("Written by `make bench`"):
            lines[number] = line.split(" Rerun alone on ")[0] + " " + stamp
            break
    path.write_text("\n".join(lines).rstrip() + "\n")


def main() -> None:
    if sys.argv[1:]:
        rerun(sys.argv[1:])
        return
    sys.path.insert(0, str(ROOT / "lambdas"))
    parts = [
        "# Benchmarks",
        "",
        f"Written by `make bench` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python {platform.python_version()}, "
        f"{platform.machine()}. Each figure stands beside a baseline measured in the same run, because timings "
        "vary with the machine's load: compare ratios, not absolute times.",
        "",
    ]
    for name in SECTIONS:
        print(f"running {name} ...", file=sys.stderr)
        parts.append(importlib.import_module(name).run())
    (ROOT / "docs" / "benchmarks.md").write_text("\n".join(parts).rstrip() + "\n")
    print((ROOT / "docs" / "benchmarks.md").read_text())


if __name__ == "__main__":
    main()
