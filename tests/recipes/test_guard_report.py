"""The recipes' reading of the guard's report (`blocked`): the reviewed overrides a recipe writes are for the
findings the guard blocks, never for one an override in the tree allows already."""

from __future__ import annotations

from infra.guard import Finding, Override, report
from tests.recipes.recipes import blocked


def finding(resource: str, resource_type: str, change: str) -> Finding:
    stack, logical_id = resource.rsplit("/", 1)
    return Finding(stack, logical_id, resource_type, change, "definite", "planted", ())  # type: ignore[arg-type]


def test_only_the_findings_the_guard_blocks_are_read_each_by_its_kind() -> None:
    findings = [
        finding("dev/Stateless/booking", "schema", "migration"),
        finding("prod/Stateless/booking", "schema", "migration"),
        finding("test/Environment/location", "account and region", "move"),
    ]
    allowed = [Override("dev/Stateless/booking", "migration", "reviewed")]
    text, passed = report(findings, allowed, "the baseline")
    assert not passed and "allowed by a reviewed override (1)" in text
    assert blocked(text, "schema") == ["prod/Stateless/booking"]
    assert blocked(text, "account and region") == ["test/Environment/location"]
    assert blocked(report(findings[:1], allowed, "the baseline")[0], "schema") == []
