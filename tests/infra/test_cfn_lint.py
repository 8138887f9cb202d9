"""cfn-lint finds no errors and no warnings in any synthesized template (ignored rules: .cfnlintrc.yaml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.infra.conftest import ENVIRONMENTS, STACK_KINDS, Synthesized

ROOT = Path(__file__).resolve().parents[2]


def test_cfn_lint_is_clean_on_every_template(synthesized: Synthesized) -> None:
    templates = [str(synthesized.template_path(env, kind)) for env in ENVIRONMENTS for kind in STACK_KINDS]
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--config-file",
            str(ROOT / ".cfnlintrc.yaml"),
            *templates,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr
