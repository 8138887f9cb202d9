"""What config alone defines is generated (docs/environments.md's per-environment table, deliver.yml's jobs) and is
current."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from infra import generated
from infra.config import EnvironmentConfig
from infra.environments import environments

ROOT = Path(__file__).resolve().parents[2]
# Every page a person reads (docs/benchmarks.md is what they are checked against).
STATING_PAGES = [
    ROOT / "README.md",
    *sorted(set((ROOT / "docs").glob("*.md")) - {ROOT / "docs" / "benchmarks.md"}),
]


def test_every_generated_file_is_current() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in generated.outputs(environments()).items()
        if path.read_text() != text
    ]
    assert stale == [], "stale: run `make docs`"


def test_the_check_command_passes_on_the_committed_files() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "infra.generated", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_the_environments_table_has_a_column_per_environment_in_config_order() -> None:
    table = generated.environments_table(environments())
    header = table.splitlines()[0]
    assert [cell.strip() for cell in header.strip("|").split("|")][1:] == list(environments())
    assert all(line.count("|") == len(environments()) + 2 for line in table.splitlines())


def test_the_environments_table_shows_each_environment_from_its_own_config(config: EnvironmentConfig) -> None:
    column = list(environments()).index(config.name) + 2
    rows = {
        line.split("|")[1].strip(): line.split("|")[column].strip()
        for line in generated.environments_table(environments()).splitlines()[2:]
    }
    assert rows["account / region"] == f"{config.account} / {config.region}"
    assert rows["removal policy"].startswith("retain" if config.retains_data else "destroy")
    assert rows["log retention"] == f"{config.log_retention_days} days"
    assert rows["Lambda concurrency quota needed"].startswith(str(config.required_concurrency_quota()))
    assert rows["deployed by `deliver`"] == (
        "on a release (tag `v*`)" if config.production else "on every push to `main`"
    )
    for plan in config.source_tables:
        assert f"`{plan.construct_id}`" in rows["source tables"]


def prose(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_the_proof_loop_times_the_docs_state_are_the_ones_make_bench_measured() -> None:
    """The `make test` times docs/testing.md (and any other page) states come from docs/benchmarks.md
    (`bench.proof`), not from memory: rerunning the benchmark and not the docs (or the other way round) fails here."""
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    warm = re.search(r"\| `make test` on a set-up checkout \| (\d+) \|", bench)
    fresh = re.search(r"\| `make test` on a fresh clone \(empty caches\) \| (\d+) \|", bench)
    assert warm and fresh, "docs/benchmarks.md has no proof-loop table"
    stated = [
        found
        for page in STATING_PAGES
        for pattern in (
            r"(\d+) s warm, (\d+) s on a fresh clone",
            r"`make test` takes (\d+) s on a set-up checkout and (\d+) s on a fresh clone",
        )
        for found in re.findall(pattern, prose(page))
    ]
    assert re.findall(r"`make test` takes (\d+) s on a set-up", prose(ROOT / "docs" / "testing.md")), (
        "docs/testing.md states the proof loop's time"
    )
    assert set(stated) == {(warm.group(1), fresh.group(1))}, (stated, warm.group(1), fresh.group(1))


def test_the_synth_figures_the_docs_state_are_the_ones_make_bench_measured() -> None:
    """The warm `make synth` time the README states and the byte-code ratios docs/testing.md states come from
    docs/benchmarks.md."""
    bench = (ROOT / "docs" / "benchmarks.md").read_text()
    warm = re.search(r"\| warm `make synth` [^|]*\| ([0-9.]+) \|", bench)
    ratios = [float(r) for r in re.findall(r"\| ([0-9.]+)× \| ≤ \d+ s: ", bench)]
    assert warm and ratios, "docs/benchmarks.md has no synth table"
    assert f"`make synth` takes {warm.group(1)} s once set up" in prose(ROOT / "README.md")
    stated = re.search(
        r"a synth reads byte code, ([0-9.]+)-([0-9.]+)× the time it took without",
        prose(ROOT / "docs" / "testing.md"),
    )
    assert stated and (float(stated.group(1)), float(stated.group(2))) == (min(ratios), max(ratios)), ratios
