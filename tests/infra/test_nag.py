"""Every cdk-nag 3.x rule pack passes on every stack of every environment (acknowledged findings aside)."""

from __future__ import annotations

import pytest

from infra.nag import RULE_PACKS
from tests.infra.conftest import ENVIRONMENTS, STACK_KINDS, Synthesized


@pytest.mark.parametrize("pack", RULE_PACKS, ids=lambda pack: pack.__name__)
@pytest.mark.parametrize("kind", STACK_KINDS)
@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_rule_pack_has_no_unacknowledged_findings(
    synthesized: Synthesized, env_name: str, kind: str, pack
) -> None:  # type: ignore[no-untyped-def]
    result = pack().validate_scope(synthesized.stack(env_name, kind))
    findings = [
        f"{violation.rule_name} ({violation.severity}): "
        + ", ".join(resource.construct_path for resource in violation.violating_resources)
        for violation in result.violations
    ]
    assert result.success and not findings, "\n".join(findings)
