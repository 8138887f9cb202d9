"""The proof loop's fresh clone shares this checkout's set-up without touching it: no make run in the clone, the
nested ones the tests start included, installs anything into the shared environments."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.proof import fresh_clone


def test_no_make_in_the_fresh_clone_reinstalls_the_environments_it_shares(tmp_path: Path) -> None:
    clone = fresh_clone(tmp_path)
    # `make client` is what the install tests run in the clone, without the -o flags of the clone's `make test`.
    planned = subprocess.run(
        ["make", "-n", "--no-print-directory", "client"],
        cwd=clone,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "npm ci" not in planned and "uv pip sync" not in planned, planned
