"""The IAM identities that may call the search domain, defined beside the domain that trusts them.

They live in the stateful stack because the domain's resource policy names them: defining them with the
functions that use them would make the two stacks reference each other. Their names are fixed per environment
(``<domain name>-<purpose>``), so the stateless stack names them without any cross-stack value and people can
find the admin role to assume.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import EnvironmentConfig
from infra.iam import attach_policy


class SearchAccess(Construct):
    """The fine-grained-access-control master role, the index-bootstrap, ops-worker and stream-sync roles.

    - ``admin_role``: the FGAC master user (from config, or created here). Only the bootstrap and ops-worker
      functions and the principals named in ``search.admin_principals`` (by default the account's IAM Identity
      Center AdministratorAccess users) may assume it; nobody else in the account can, whatever their IAM
      policies say.
    - ``bootstrap_role``: the index-bootstrap function's execution role; it assumes ``admin_role`` to put
      templates, scripts, indices, aliases and the stream-sync role mapping.
    - ``ops_worker_role``: the ops workflows' worker function's execution role; it assumes ``admin_role`` to
      reindex, reconcile, redrive and purge tombstones.
    - ``sync_role``: the stream-sync function's execution role; OpenSearch maps it to a role that may only
      write to the platform's indices.

    The ``*_arn`` attributes are the same ARNs as plain strings, for the stateless stack.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, removal_policy: RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)

        def function_role(construct_id: str, purpose: str, description: str) -> tuple[iam.Role, str]:
            role_name = config.platform_role_name(purpose)
            role = iam.Role(
                self,
                construct_id,
                role_name=role_name,
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=description,
            )
            return role, config.role_arn(role_name)

        self.bootstrap_role, self.bootstrap_role_arn = function_role(
            "BootstrapRole", "index-bootstrap", "Index bootstrap custom resource"
        )
        self.sync_role, self.sync_role_arn = function_role(
            "SyncRole", "stream-sync", "DynamoDB stream to OpenSearch sync"
        )
        self.ops_worker_role, self.ops_worker_role_arn = function_role(
            "OpsWorkerRole",
            "ops-worker",
            "Ops workflows worker (reindex, reconcile, redrive, tombstone purge)",
        )
        if config.search.master_role_arn:
            self.admin_role: iam.IRole = iam.Role.from_role_arn(
                self, "AdminRole", config.search.master_role_arn, mutable=False
            )
            self.admin_role_arn = config.search.master_role_arn
        else:
            admin = iam.Role(
                self,
                "AdminRole",
                role_name=config.platform_role_name("search-admin"),
                assumed_by=iam.CompositePrincipal(
                    iam.ArnPrincipal(self.bootstrap_role.role_arn),
                    iam.ArnPrincipal(self.ops_worker_role.role_arn),
                ),
                description="OpenSearch fine-grained access control master user",
            )
            patterns = config.admin_principal_arns()
            if patterns:
                accounts = sorted({pattern.split(":")[4] for pattern in patterns})
                admin.assume_role_policy.add_statements(  # type: ignore[union-attr]
                    iam.PolicyStatement(
                        principals=[iam.AccountPrincipal(account) for account in accounts],
                        actions=["sts:AssumeRole"],
                        conditions={"ArnLike": {"aws:PrincipalArn": patterns}},
                    )
                )
            # The retained domain's master user: without it nobody could administer the domain after the
            # stack is deleted.
            admin.apply_removal_policy(removal_policy)
            self.admin_role = admin
            self.admin_role_arn = config.role_arn(config.platform_role_name("search-admin"))
        for construct_id, role in (
            ("BootstrapAssumeAdmin", self.bootstrap_role),
            ("OpsWorkerAssumeAdmin", self.ops_worker_role),
        ):
            attach_policy(
                self,
                construct_id,
                role,
                [iam.PolicyStatement(actions=["sts:AssumeRole"], resources=[self.admin_role.role_arn])],
            )
