"""checkov findings that cannot be fixed, skipped on the resource that owns them with checkov's own metadata
(`Metadata.checkov.skip`: each skip names the check and says why), as cdk-nag's acknowledgments are kept."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnResource
from constructs import IConstruct


def skip(construct: IConstruct, reason: str, *check_ids: str) -> None:
    """Skip ``check_ids`` on ``construct``'s CloudFormation resource (its default child), giving ``reason``."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if not isinstance(resource, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to skip checkov checks on")
    found: Any = resource.get_metadata("checkov") or {}
    skips = [*found.get("skip", []), *({"id": check, "comment": reason} for check in check_ids)]
    resource.add_metadata("checkov", {"skip": skips})
