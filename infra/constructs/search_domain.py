"""The private, hardened OpenSearch domain: VPC placement, encryption, FGAC, logs and a role-scoped policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct
from refdata.indexnames import read_alias

from infra.config import CognitoLogin, ReadRole, SamlLogin, SearchSettings
from infra.nag import acknowledge

LOG_TYPES = ("SearchSlow", "IndexSlow", "Application", "Audit")


def domain_arn(domain_name: str) -> str:
    """The ARN of the domain named ``domain_name`` in the deploying stack's account and region."""
    return f"arn:{Aws.PARTITION}:es:{Aws.REGION}:{Aws.ACCOUNT_ID}:domain/{domain_name}"


def reader_grants(domain: str, schemas: Sequence[str]) -> list[tuple[list[str], list[str]]]:
    """(actions, resources) a reader of ``schemas`` may use on ``domain`` (an ARN): search and count (GET, POST) and
    get documents (GET) through the schemas' read aliases, nothing else. The domain's access policy admits each read
    role (and its smoke probe) to exactly these, and the probe role's identity policy allows exactly these: in one
    account a resource policy naming the account root only delegates to the caller's identity policy."""
    aliases = [f"{domain}/{read_alias(schema)}" for schema in schemas]
    return [
        (
            ["es:ESHttpGet", "es:ESHttpPost"],
            [f"{alias}/{api}" for alias in aliases for api in ("_search", "_count")],
        ),
        (["es:ESHttpGet"], [f"{alias}/_doc/*" for alias in aliases]),
    ]


def _saml_options(login: CognitoLogin | SamlLogin | None) -> dict[str, Any]:
    if not isinstance(login, SamlLogin):
        return {}
    return {
        "saml_authentication_enabled": True,
        "saml_authentication_options": opensearch.SAMLOptionsProperty(
            idp_entity_id=login.idp_entity_id,
            idp_metadata_content=login.idp_metadata_xml,
            master_backend_role=login.master_backend_role,
            roles_key=login.roles_key,
            session_timeout_minutes=login.session_timeout_minutes,
        ),
    }


class SearchDomain(Construct):
    """One OpenSearch domain sized from config, reachable only from inside the VPC and only by named roles.

    The resource policy is written as the L1 property with the domain's ARN built from its fixed name, and the
    log-delivery resource policy is our own: both avoid the hidden custom resources the L2 would add.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: SearchSettings,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        key: kms.IKey,
        admin_role: iam.IRole,
        client_roles: list[iam.IRole],
        log_retention: logs.RetentionDays,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.domain_name = settings.domain_name
        self.domain_arn = domain_arn(settings.domain_name)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description=f"OpenSearch domain {settings.domain_name}: HTTPS from platform functions only",
            allow_all_outbound=False,
        )
        # The retained domain's network interfaces live in this group.
        self.security_group.apply_removal_policy(removal_policy)
        # Readers and Dashboards users (config): HTTPS only; the access policy and FGAC still decide.
        readers = settings.reader_network
        sources = [*(("Group", {"source_security_group_id": g}) for g in readers.security_group_ids)]
        sources += [("Cidr", {"cidr_ip": cidr}) for cidr in readers.cidrs]
        counts = {"Group": 0, "Cidr": 0}
        for kind, source in sources:
            ec2.CfnSecurityGroupIngress(
                self,
                f"Reader{kind}Ingress{counts[kind]}",
                group_id=self.security_group.security_group_id,
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                description=f"HTTPS from readers ({next(iter(source.values()))})",
                **source,
            )
            counts[kind] += 1
        log_groups = {
            kind: logs.LogGroup(
                self,
                f"{kind}Logs",
                encryption_key=key,
                retention=log_retention,
                removal_policy=removal_policy,
            )
            for kind in LOG_TYPES
        }
        # Retained with the domain and its log groups, or a retained domain could no longer write its logs.
        log_delivery = logs.ResourcePolicy(
            self,
            "LogDelivery",
            policy_statements=[
                iam.PolicyStatement(
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:PutLogEvents", "logs:CreateLogStream"],
                    resources=[group.log_group_arn for group in log_groups.values()],
                    conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
                )
            ],
        )
        log_delivery.apply_removal_policy(removal_policy)
        zones = settings.availability_zone_count
        self.domain = opensearch.Domain(
            self,
            "Resource",
            domain_name=settings.domain_name,
            version=opensearch.EngineVersion.open_search(settings.engine_version.removeprefix("OpenSearch_")),
            capacity=opensearch.CapacityConfig(
                data_node_instance_type=settings.data_node_type,
                data_nodes=settings.data_node_count,
                master_node_instance_type=settings.master_node_type,
                master_nodes=settings.master_node_count or None,
                multi_az_with_standby_enabled=False,
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=zones > 1, availability_zone_count=zones if zones > 1 else None
            ),
            ebs=opensearch.EbsOptions(
                volume_size=settings.volume_size_gib,
                volume_type=ec2.EbsDeviceVolumeType.GP3,
                iops=settings.volume_iops,
                throughput=settings.volume_throughput_mibps,
            ),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=subnets[:zones])],
            security_groups=[self.security_group],
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True, kms_key=key),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2_PFS,
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(
                master_user_arn=admin_role.role_arn, **_saml_options(settings.dashboards_login)
            ),
            cognito_dashboards_auth=self._cognito_options(settings.dashboards_login),
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=log_groups["SearchSlow"],
                slow_index_log_enabled=True,
                slow_index_log_group=log_groups["IndexSlow"],
                app_log_enabled=True,
                app_log_group=log_groups["Application"],
                audit_log_enabled=True,
                audit_log_group=log_groups["Audit"],
            ),
            suppress_logs_resource_policy=True,
            automated_snapshot_start_hour=settings.snapshot_hour_utc,
            enable_auto_software_update=True,
            # A new engine_version in config upgrades the domain in place instead of replacing it.
            enable_version_upgrade=True,
            off_peak_window_enabled=True,
            removal_policy=removal_policy,
        )
        # CDK orders the domain after its log-delivery policy only when it writes that policy itself.
        self.domain.node.add_dependency(log_delivery)
        cfn_domain = self.domain.node.default_child
        assert isinstance(cfn_domain, opensearch.CfnDomain)
        principals = [admin_role.role_arn, *(role.role_arn for role in client_roles)]
        login = settings.dashboards_login
        if isinstance(login, CognitoLogin):
            principals.append(login.authenticated_role_arn)
        statements: list[dict[str, object]] = [
            {
                "Effect": "Allow",
                "Principal": {"AWS": principals},
                "Action": ["es:ESHttp*"],
                "Resource": f"{self.domain_arn}/*",
            }
        ]
        for reader in settings.read_roles:
            # The smoke run's probe of the reader (infra/constructs/smoke.py) is admitted exactly like it.
            probe = f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/{settings.probe_role_name(reader.name)}"
            statements.extend(self._reader_statements(reader, probe))
        if isinstance(login, SamlLogin):
            # A browser's requests are not SigV4-signed: Dashboards (and only Dashboards) must admit them, so
            # SAML sign-in and fine-grained access control decide. The REST API stays role-scoped.
            statements.append(
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": "*"},
                    "Action": ["es:ESHttpGet", "es:ESHttpPost", "es:ESHttpPut", "es:ESHttpDelete"],
                    "Resource": f"{self.domain_arn}/_dashboards*",
                }
            )
            acknowledge(
                self.domain,
                "SAML sign-in to Dashboards needs unsigned browser requests to reach Dashboards (and only "
                "Dashboards: the REST API stays role-scoped); SAML, fine-grained access control and the VPC's "
                "security group decide who gets in.",
                "AwsSolutions-OS5",
            )
        cfn_domain.access_policies = {"Version": "2012-10-17", "Statement": statements}
        acknowledge(
            self.domain,
            "The domain lives in isolated VPC subnets; IP allowlists do not apply to VPC domains, whose access "
            "is limited by security group, by the role-scoped resource policy and by fine-grained access control.",
            "AwsSolutions-OS3",
        )
        if settings.master_node_count == 0:
            acknowledge(
                self.domain,
                f"This environment's config runs {settings.data_node_count} data node(s) without dedicated "
                "masters to save cost; production config requires three dedicated masters (validated).",
                "AwsSolutions-OS4",
            )
        if zones == 1:
            acknowledge(
                self.domain,
                "This environment's config runs a single-zone domain to save cost; production config "
                "requires three-zone awareness (validated).",
                "AwsSolutions-OS7",
            )

    def _reader_statements(self, reader: ReadRole, probe_role_arn: str) -> list[dict[str, object]]:
        """A read role's IAM roles may search and count (GET, POST) and get documents (GET) through its schemas'
        read aliases, and reach nothing else (fine-grained access control then hides what the role may not see).

        The roles are named by an exact `aws:PrincipalArn` condition under their accounts rather than as
        principals: they belong to application teams, may be created after this stack (a policy's named principal
        must exist when the policy is set), and are then matched by name, as fine-grained access control matches
        them."""
        accounts = sorted({arn.split(":")[4] for arn in reader.iam_role_arns})
        roots = [f"arn:{Aws.PARTITION}:iam::{account}:root" for account in accounts]
        who = {
            "Principal": {"AWS": [*roots, f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:root"]},
            "Condition": {"ArnEquals": {"aws:PrincipalArn": [*sorted(reader.iam_role_arns), probe_role_arn]}},
        }
        return [
            {"Effect": "Allow", **who, "Action": actions, "Resource": resources}
            for actions, resources in reader_grants(self.domain_arn, reader.schemas)
        ]

    def _cognito_options(self, login: CognitoLogin | SamlLogin | None) -> opensearch.CognitoOptions | None:
        """Cognito sign-in: OpenSearch configures the pools through a role AWS keeps current."""
        if not isinstance(login, CognitoLogin):
            return None
        role = iam.Role(
            self,
            "DashboardsCognitoRole",
            assumed_by=iam.ServicePrincipal("opensearchservice.amazonaws.com"),
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonOpenSearchServiceCognitoAccess")
            ],
            description="Lets OpenSearch Service configure Cognito sign-in for Dashboards",
        )
        acknowledge(
            role,
            "OpenSearch Service's Cognito-access policy is maintained by AWS to follow the Cognito calls the "
            "service makes to configure Dashboards sign-in; a hand-written copy would break sign-in when those change.",
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonOpenSearchServiceCognitoAccess]",
        )
        return opensearch.CognitoOptions(
            user_pool_id=login.user_pool_id, identity_pool_id=login.identity_pool_id, role=role
        )

    @property
    def endpoint(self) -> str:
        return self.domain.domain_endpoint
