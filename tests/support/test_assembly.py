"""The session's one synth starts only for sessions that run tests/infra, and a failed one fails every test that
reads it with its traceback instead of a synth per worker."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.assembly import ROOT, ensure, reads_the_synth


@pytest.mark.parametrize(
    ("args", "cwd", "expected"),
    [
        ([], ROOT, True),  # testpaths: the whole suite
        (["tests"], ROOT, True),
        (["tests/infra"], ROOT, True),
        (["tests/infra/test_nag.py::test_the_report_knows_a_rule_prefix_for_each_pack"], ROOT, True),
        (["test_nag.py"], ROOT / "tests" / "infra", True),
        (["tests/integration/test_sync_pipeline.py"], ROOT, True),
        (["tests/lambdas"], ROOT, True),  # tests/lambdas/ops stands the templates up in moto
        (["tests/lambdas/refdata", "tests/support/test_template.py"], ROOT, False),
        (["tests/recipes"], ROOT, False),
    ],
)
def test_the_synth_starts_for_sessions_that_read_it(args: list[str], cwd: Path, expected: bool) -> None:
    config = SimpleNamespace(args=args, invocation_params=SimpleNamespace(dir=cwd))
    assert reads_the_synth(config) is expected  # type: ignore[arg-type]


def test_a_failed_synth_fails_its_readers_with_the_cause(tmp_path: Path) -> None:
    (tmp_path / "failure.txt").write_text("Traceback ...\nConfigError: search.data_node_count: must be >= 1")
    with pytest.raises(RuntimeError, match="the session's synth failed:\nTraceback"):
        ensure(tmp_path)
