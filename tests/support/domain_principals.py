"""Whom a signed request to a domain acts as: the IAM role whose credentials signed it (the domain front's half of
fine-grained access control; what that role may do is the secured node's security plugin's to decide,
tests/support/secured_node.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Subject:
    """The authenticated user of a request: an IAM principal's ARN."""

    name: str


# Requests of a front without FGAC: every check passes, as on a domain without the security plugin.
UNRESTRICTED = Subject("loopback")


@dataclass(frozen=True)
class FineGrainedAccessControl:
    """Attribute signed requests to IAM roles, as a domain with IAM authentication does.

    `principals` maps a request's access key id to the IAM role ARN whose credentials they are (as STS handed
    them out: an assumed-role session acts as its role); `master_role_arn` is the domain's FGAC master user ARN.
    """

    master_role_arn: str
    principals: Mapping[str, str] | Callable[[str], str | None]

    def subject(self, access_key: str) -> Subject | None:
        lookup = self.principals
        arn = lookup(access_key) if callable(lookup) else lookup.get(access_key)
        if arn is None:
            return None
        return Subject(arn)
