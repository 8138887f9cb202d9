"""Permissions as customer-managed policies.

NIST 800-53, HIPAA and PCI packs reject inline policies, and CDK's grant helpers write inline ``DefaultPolicy``
documents with wildcard actions. Roles here are therefore handed to CDK with ``without_policy_updates()`` and
receive exactly the statements below; the template tests assert those statements, since a missing permission
would otherwise show only at deploy time.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct


def attach_policy(
    scope: Construct, construct_id: str, role: iam.IRole, statements: list[iam.PolicyStatement]
) -> iam.ManagedPolicy:
    """A customer-managed policy holding ``statements``, attached to ``role``."""
    return iam.ManagedPolicy(scope, construct_id, statements=statements, roles=[role])
