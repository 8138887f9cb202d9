"""The set-up people run: portable locks, a pinned installer, a synth that selects every stack, `make help`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_lock_holds_no_machine_local_index_or_find_links_lines() -> None:
    for name in ("requirements.lock", "requirements-uv.txt"):
        local = [
            line
            for line in (ROOT / name).read_text().splitlines()
            if re.match(r"\s*(--extra-index-url|--index-url|-i\s|--find-links|-f\s|--trusted-host)", line)
        ]
        assert local == [], f"{name}: {local}"


def test_every_locked_package_is_pinned_with_hashes() -> None:
    for name in ("requirements.lock", "requirements-uv.txt"):
        text = (ROOT / name).read_text()
        pins = re.findall(
            r"^([A-Za-z0-9_.-]+)==\S+((?: \\\n\s+--hash=sha256:[0-9a-f]{64})+)", text, re.MULTILINE
        )
        declared = re.findall(r"^[A-Za-z0-9_.-]+==", text, re.MULTILINE)
        assert pins and len(pins) == len(declared), name


def test_make_synth_selects_every_stack_never_looks_anything_up_and_checks_the_assembly() -> None:
    recipe = subprocess.run(
        ["make", "-n", "synth", "-o", "setup", "-o", ".venv/.installed", "-o", "node_modules/.installed"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "npx cdk synth --quiet --no-lookups '**'" in recipe
    assert "-m infra.report --check cdk.out" in recipe


def test_make_help_lists_the_two_commands_and_fmt() -> None:
    listed = subprocess.run(
        ["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    names = {line.split()[1] for line in listed.splitlines() if line.strip().startswith("make ")}
    assert {"synth", "test", "fmt", "docs", "guard", "recipes", "setup"} <= names
