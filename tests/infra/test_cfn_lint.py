"""cfn-lint finds no errors and no warnings in any synthesized template (ignored rules: .cfnlintrc.yaml)."""

from __future__ import annotations

from tests.infra.conftest import ENVIRONMENTS, STACK_KINDS, Synthesized
from tests.support.heavy_tools import CFN_LINT, templates_of


def test_cfn_lint_is_clean_on_every_template(synthesized: Synthesized) -> None:
    linted = templates_of(synthesized.outdir)
    assert len(linted) == len(ENVIRONMENTS) * len(STACK_KINDS), linted
    result = synthesized.tools.result(CFN_LINT)
    assert sorted(result.verdicts) == linted
    assert result.findings == []
