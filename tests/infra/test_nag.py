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
    result = synthesized.stack(env_name, kind)["nag"][pack.__name__]  # the pack's validate_scope on the stack
    assert result["success"] and not result["findings"], "\n".join(result["findings"])


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_every_acknowledgment_names_a_rule_of_the_five_packs_and_gives_a_specific_reason(
    synthesized: Synthesized, env_name: str
) -> None:
    found = synthesized.acknowledgments(env_name)
    vague = [(path, rule) for path, rule, reason in found if len(reason) < 60]
    assert found and not vague


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_acknowledgments_sit_on_the_construct_that_owns_the_resource_not_on_a_stack(
    synthesized: Synthesized, env_name: str
) -> None:
    stacks = {synthesized.stack(env_name, kind)["path"] for kind in STACK_KINDS}
    on_stacks = [(path, rule) for path, rule, _ in synthesized.acknowledgments(env_name) if path in stacks]
    assert on_stacks == []


def test_the_report_knows_a_rule_prefix_for_each_pack() -> None:
    from infra.report import PACK_PREFIXES

    assert len(PACK_PREFIXES) == len(RULE_PACKS)
