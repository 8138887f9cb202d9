"""The proof loop's fresh clone shares this checkout's set-up without touching it: no make run in the clone, the
nested ones the tests start included, installs anything into the shared environments."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.proof import engine_tests, fresh_clone


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


def test_the_node_tests_are_told_apart_by_a_collection_in_a_process_of_its_own() -> None:
    """The proof loop's share of the node tests comes from a bare `python -c` collection, where only pytest's own
    pythonpath (pyproject) puts lambdas/ on sys.path: a node module importing the product at import time once
    broke it."""
    tests = engine_tests(["tests/lambdas/search/test_indices.py", "tests/bench/test_proof.py"])
    uses_a_node = {test.split("::")[0] for test, node in tests.items() if node}
    assert uses_a_node == {"tests/lambdas/search/test_indices.py"}, tests
