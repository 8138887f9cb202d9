"""cdk-nag 3.x wiring: the rule packs every stack must pass, and acknowledgments kept beside their owners."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from cdk_nag import (
    AwsSolutionsChecks,
    HIPAASecurityChecks,
    NIST80053R5Checks,
    PCIDSS321Checks,
    ServerlessChecks,
)
from constructs import IConstruct

RULE_PACKS = (AwsSolutionsChecks, ServerlessChecks, NIST80053R5Checks, HIPAASecurityChecks, PCIDSS321Checks)


def acknowledge(construct: IConstruct, reason: str, *rule_ids: str) -> None:
    """Acknowledges findings on ``construct`` (and its children) with one specific reason."""
    Validations.of(construct).acknowledge(
        *(Acknowledgment(id=rule_id, reason=reason) for rule_id in rule_ids)
    )


def finding_resource(scope: IConstruct, value: str) -> str:
    """How cdk-nag spells a (token) resource string inside a granular finding id such as ``IAM5[Resource::...]``.

    References render as ``<LogicalId>`` / ``<LogicalId.Attr>``, cross-stack imports as the export name, and any
    other intrinsic (``Fn::Select`` of an ``Fn::Split``, say) as its compact JSON, as cdk-nag writes it.
    """
    return _render(Stack.of(scope).resolve(value))


def _render(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and len(node) == 1:
        ((fn, arg),) = node.items()
        if fn == "Fn::Join":
            return str(arg[0]).join(_render(part) for part in arg[1])
        if fn == "Fn::ImportValue":
            return _render(arg)
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Ref":
            return f"<{arg}>"
        if fn.startswith("Fn::"):
            return json.dumps(node, separators=(",", ":"))
    raise ValueError(f"cannot render {node!r} as a cdk-nag finding resource")


def logical_id(construct: IConstruct) -> str:
    """The logical id that granular finding ids (``Rule[Resource::<id>...]``) embed."""
    resource = construct.node.default_child or construct
    return Stack.of(construct).get_logical_id(resource)  # type: ignore[arg-type]
