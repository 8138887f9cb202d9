"""The IAM identities that may call the search domain, defined beside the domain that trusts them.

They live in the stateful stack because the domain's resource policy names them: defining them with the
functions that use them would make the two stacks reference each other.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import SearchSettings
from infra.iam import attach_policy


class SearchAccess(Construct):
    """The fine-grained-access-control master role, the index-bootstrap role and the stream-sync role.

    - ``admin_role``: the FGAC master user (from config, or created here and assumable by the bootstrap
      function and by principals of this account that IAM allows to assume it).
    - ``bootstrap_role``: the index-bootstrap function's execution role; it assumes ``admin_role`` to put
      templates, scripts, indices, aliases and the stream-sync role mapping.
    - ``sync_role``: the stream-sync function's execution role; OpenSearch maps it to a role that may only
      write to the platform's indices.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: SearchSettings) -> None:
        super().__init__(scope, construct_id)
        lambda_principal = iam.ServicePrincipal("lambda.amazonaws.com")
        self.bootstrap_role = iam.Role(
            self, "BootstrapRole", assumed_by=lambda_principal, description="Index bootstrap custom resource"
        )
        self.sync_role = iam.Role(
            self, "SyncRole", assumed_by=lambda_principal, description="DynamoDB stream to OpenSearch sync"
        )
        if settings.master_role_arn:
            self.admin_role: iam.IRole = iam.Role.from_role_arn(
                self, "AdminRole", settings.master_role_arn, mutable=False
            )
        else:
            self.admin_role = iam.Role(
                self,
                "AdminRole",
                assumed_by=iam.CompositePrincipal(
                    iam.AccountRootPrincipal(), iam.ArnPrincipal(self.bootstrap_role.role_arn)
                ),
                description="OpenSearch fine-grained access control master user",
            )
        attach_policy(
            self,
            "BootstrapAssumeAdmin",
            self.bootstrap_role,
            [iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[self.admin_role.role_arn])],
        )
