"""The session's one synth starts only for sessions that run tests/infra, and a failed one fails every test that
reads it with its traceback instead of a synth per worker. A successful one is kept by the digest of what it read,
and a later session with the same inputs starts from a copy of it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import assembly
from tests.support.assembly import KEPT, ROOT, ensure, inputs_key, keep, reads_the_synth, restore


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


def test_the_key_follows_every_input_of_the_synth_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "stack.py").write_text("table = 1")
    (tmp_path / "cdk.context.json").write_text("{}")
    key = inputs_key(tmp_path)
    (tmp_path / "infra" / "__pycache__").mkdir()
    (tmp_path / "infra" / "__pycache__" / "stack.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("not read by the synth")
    assert inputs_key(tmp_path) == key

    (tmp_path / "lambdas").mkdir()  # an empty folder holds nothing the synth reads
    assert inputs_key(tmp_path) == key

    changes = [
        lambda: (tmp_path / "infra" / "stack.py").write_text("table = 2"),
        lambda: (tmp_path / "infra" / "stack.py").rename(tmp_path / "infra" / "stacks.py"),
        lambda: (tmp_path / "lambdas" / "handler.py").write_text(""),
        lambda: (tmp_path / "cdk.context.json").write_text('{"account.dev": "1"}'),
        lambda: monkeypatch.setenv("CDK_DEFAULT_ACCOUNT", "111111111111"),
    ]
    seen = [key]
    for change in changes:
        change()
        seen.append(inputs_key(tmp_path))
    assert len(set(seen)) == len(seen), seen  # each change is a new key


def synthesized_into(directory: Path, manifest: str) -> Path:
    (directory / "cdk.out").mkdir(parents=True)
    (directory / "cdk.out" / "manifest.json").write_text(manifest)
    (directory / "facts.json").write_text('{"environments": {}}')
    return directory


def test_a_kept_synth_is_restored_as_it_was_made_and_only_the_newest_are_kept(tmp_path: Path) -> None:
    root, cache = tmp_path / "root", tmp_path / "cache"
    root.mkdir()
    (root / "app.py").write_text("v0")
    made = synthesized_into(tmp_path / "made", '{"version": "0"}')
    key = inputs_key(root)
    keep(made, key, root, cache)

    session = tmp_path / "session"
    assert restore(session, key, cache)
    assert (session / "cdk.out" / "manifest.json").read_text() == '{"version": "0"}'
    assert (session / "facts.json").is_file()
    (session / "cdk.out" / "manifest.json").write_text("a test wrote here")
    assert (cache / key / "cdk.out" / "manifest.json").read_text() == '{"version": "0"}'
    assert not restore(tmp_path / "other", "0" * 32, cache)

    keys = [key]
    for version in range(1, KEPT + 2):
        (root / "app.py").write_text(f"v{version}")
        keys.append(inputs_key(root))
        keep(made, keys[-1], root, cache)
    assert sorted(path.name for path in cache.iterdir()) == sorted(keys[-KEPT:])


def test_a_synth_whose_inputs_changed_while_it_ran_is_not_kept(tmp_path: Path) -> None:
    root, cache = tmp_path / "root", tmp_path / "cache"
    root.mkdir()
    (root / "app.py").write_text("before")
    key = inputs_key(root)
    (root / "app.py").write_text("edited during the synth")
    keep(synthesized_into(tmp_path / "made", "{}"), key, root, cache)
    assert not restore(tmp_path / "session", key, cache)


def test_a_failed_synth_is_recorded_and_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept: list[object] = []

    def failing(directory: Path) -> None:
        raise ValueError("search.data_node_count: must be >= 1")

    monkeypatch.setattr(assembly, "synthesize", failing)
    monkeypatch.setattr(assembly, "keep", lambda *args: kept.append(args))
    with pytest.raises(ValueError, match="data_node_count"):
        assembly.main([str(tmp_path), "0" * 32])
    assert "data_node_count" in (tmp_path / "failure.txt").read_text()
    assert kept == []
