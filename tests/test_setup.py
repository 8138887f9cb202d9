"""The set-up people run: portable locks, a pinned installer, a synth that selects every stack, `make help`, a type
check that follows what the code imports."""

from __future__ import annotations

import ast
import re
import subprocess
import tomllib
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_lock_holds_no_machine_local_index_or_find_links_lines() -> None:
    local = re.compile(r"\s*(--extra-index-url|--index-url|-i\s|--find-links|-f\s|--trusted-host)")
    for name in ("requirements.lock", "requirements-uv.txt"):
        found = [line for line in (ROOT / name).read_text().splitlines() if local.match(line)]
        assert found == [], f"{name}: {found}"


def test_every_locked_package_is_pinned_with_hashes() -> None:
    for name in ("requirements.lock", "requirements-uv.txt"):
        text = (ROOT / name).read_text()
        pins = re.findall(
            r"^([A-Za-z0-9_.-]+)==\S+((?: \\\n\s+--hash=sha256:[0-9a-f]{64})+)", text, re.MULTILINE
        )
        declared = re.findall(r"^[A-Za-z0-9_.-]+==", text, re.MULTILINE)
        assert pins and len(pins) == len(declared), name


def make(*args: str) -> str:
    return subprocess.run(["make", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_make_synth_selects_every_stack_never_looks_anything_up_and_checks_the_assembly() -> None:
    prerequisites = ["-o", "setup", "-o", ".venv/.installed", "-o", "node_modules/.installed"]
    recipe = make("-n", "synth", *prerequisites)
    assert "npx cdk synth --quiet --no-lookups '**'" in recipe
    assert "-m infra.report --check cdk.out" in recipe


def test_make_help_lists_the_two_commands_and_fmt() -> None:
    listed = make("--no-print-directory", "help")
    names = {line.split()[1] for line in listed.splitlines() if line.strip().startswith("make ")}
    assert {"synth", "test", "fmt", "docs", "guard", "recipes", "setup"} <= names


def stale_or_missing_byte_code(package: str) -> list[str]:
    """The modules of an installed ``package`` whose byte code is missing or older than their source, as Python's
    import system would judge them (the header of each ``__pycache__`` file: source mtime and size, or a hash)."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
    root = Path(next(iter(spec.submodule_search_locations)))
    missing = []
    for source in root.rglob("*.py"):
        cached = Path(importlib.util.cache_from_source(str(source)))
        try:
            header = cached.read_bytes()[:16]
        except FileNotFoundError:
            missing.append(str(source.relative_to(root)))
            continue
        if header[:4] != importlib.util.MAGIC_NUMBER:
            missing.append(str(source.relative_to(root)))
            continue
        if int.from_bytes(header[4:8], "little") & 1:  # hash-based byte code: valid by construction
            continue
        stat = source.stat()
        mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
        if mtime != int(stat.st_mtime) & 0xFFFFFFFF or size != stat.st_size & 0xFFFFFFFF:
            missing.append(str(source.relative_to(root)))
    return missing


def test_set_up_byte_compiles_the_cdk_and_the_test_tools_so_no_process_compiles_them() -> None:
    """uv installs without byte code unless asked; with PYTHONDONTWRITEBYTECODE set (as in CI) every synth, worker
    and subprocess would then compile aws-cdk-lib's ~2,900 modules from source (~8 s each): `make setup` compiles."""
    for package in ("aws_cdk", "constructs", "cdk_nag", "botocore", "moto", "cfnlint"):
        missing = stale_or_missing_byte_code(package)
        assert missing == [], (
            f"{package}: {len(missing)} modules without byte code (e.g. {missing[:3]}): "
            "`rm .venv/.installed && make setup` compiles them"
        )


def test_the_byte_code_check_sees_a_module_without_byte_code(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    package = tmp_path / "uncompiled_package"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "module.py").write_text("VALUE = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert sorted(stale_or_missing_byte_code("uncompiled_package")) == ["__init__.py", "module.py"]
    import compileall

    assert compileall.compile_dir(str(package), quiet=1)
    assert stale_or_missing_byte_code("uncompiled_package") == []
    (package / "module.py").write_text("VALUE = 22\n")
    assert stale_or_missing_byte_code("uncompiled_package") == ["module.py"]


def cdk_modules_imported(paths: Iterable[Path]) -> set[str]:
    """The aws-cdk-lib modules the Python files under `paths` import (`import aws_cdk.x`, `from aws_cdk import x`,
    `from aws_cdk.x import y`)."""
    found: set[str] = set()
    for path in paths:
        for source in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names if alias.name.split(".")[0] == "aws_cdk")
                elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "aws_cdk":
                    found.add(str(node.module))
                    # aws-cdk-lib's packages export classes (capitalized) and their submodules (lower case)
                    found.update(
                        f"{node.module}.{alias.name}" for alias in node.names if alias.name[0].islower()
                    )
    return found


def followed_cdk_modules() -> set[str]:
    """What pyproject's mypy overrides follow of aws-cdk-lib (the rest is skipped)."""
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    return {
        module
        for override in overrides
        if override.get("follow_imports") == "normal"
        for module in override["module"]
        if module.split(".")[0] == "aws_cdk"
    }


def test_the_type_check_follows_exactly_the_cdk_modules_the_checked_code_imports() -> None:
    """Following every aws-cdk-lib module made a cold type check ~49 s of one core; the overrides skip the modules
    the code does not import. One the code starts to import must be followed, or mypy would take it for Any."""
    checked = re.search(r"^MYPY := \$\(BIN\)/mypy (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert checked, "the Makefile's MYPY line names what mypy checks"
    imported = cdk_modules_imported(ROOT / name for name in checked.group(1).split())
    followed = followed_cdk_modules()
    assert imported - followed == set(), "add these to pyproject's followed aws_cdk modules"
    unused = followed - imported
    assert unused == set(), "no checked code imports these: remove them from pyproject's followed list"


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import aws_cdk.aws_glue as glue\nfrom aws_cdk import Duration, aws_sqs as sqs\n"
        "from aws_cdk.aws_s3 import Bucket\nimport json\n"
    )
    found = cdk_modules_imported([tmp_path])
    assert found == {"aws_cdk", "aws_cdk.aws_glue", "aws_cdk.aws_sqs", "aws_cdk.aws_s3"}
