"""What an application team's roles need, published by the platform as managed policies to attach.

- the **writer's** policy (``WriterPolicy``): item writes (put, update, delete) on every source table, which holds
  both the items of its schemas and the counters that number them (``refdata.counters``), the offloaded geometries
  in the geometry bucket (``geometries/*``), and the data key, only as DynamoDB and S3 use it for the caller;
- one **reader's** policy per configured read role (``ReaderPolicy-<reader>``): the signed requests the domain's
  access policy admits that reader to (``reader_grants``), which a role of the platform's account needs in its own
  identity policy since the access policy names the account, and in one account that only delegates to it.

The data key's policy names only the platform's account (CDK's default key policy), which delegates to that
account's identity policies: a writer must be a role of the platform's account, with this policy attached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Aws
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct
from refdata.geometry import GEOMETRY_PREFIX

from infra.config import ReadRole
from infra.constructs.search_domain import reader_grants
from infra.nag import acknowledge, finding_resource


def reader_policy_id(reader: str) -> str:
    """The construct id of a read role's policy (read role names are a-z 0-9 _ -)."""
    return f"ReaderPolicy-{reader}"


class TeamAccess(Construct):
    """The writer's policy and each read role's policy, unattached: teams attach them to their own roles."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        tables: Sequence[dynamodb.ITable],
        geometry_bucket: s3.IBucket,
        key: kms.IKey,
        domain_arn: str,
        read_roles: Sequence[ReadRole],
    ) -> None:
        super().__init__(scope, construct_id)
        geometries = geometry_bucket.arn_for_objects(f"{GEOMETRY_PREFIX}*")
        self.writer_policy = iam.ManagedPolicy(
            self,
            "WriterPolicy",
            description="refdata-client writers: items and counters of every source table, offloaded geometries, "
            "the data key through DynamoDB and S3 (docs/client.md)",
            statements=[
                iam.PolicyStatement(
                    actions=["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    resources=[table.table_arn for table in tables],
                ),
                iam.PolicyStatement(actions=["s3:PutObject"], resources=[geometries]),
                # DynamoDB uses the table's key with the caller's permissions. DynamoDB Developer Guide, "Encryption
                # at rest: How it works" (Table keys): "If DynamoDB gets a request for the cached table key after
                # five minutes of inactivity, it sends a new request to AWS KMS to decrypt the table key." Its key
                # policy example ("Allow access through Amazon DynamoDB for all principals in the account that are
                # authorized to use Amazon DynamoDB") allows kms:Encrypt, kms:Decrypt, kms:ReEncrypt*,
                # kms:GenerateDataKey*, kms:DescribeKey and kms:CreateGrant with kms:ViaService
                # "dynamodb.<region>.amazonaws.com"; CreateGrant and ReEncrypt serve creating and re-keying a
                # table, not item writes, so the writer gets the others, as the heartbeat's writer does.
                iam.PolicyStatement(
                    actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                    resources=[key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": f"dynamodb.{Aws.REGION}.amazonaws.com"}},
                ),
                # The bucket's default encryption is SSE-KMS with the data key. Amazon S3 User Guide, "Specifying
                # server-side encryption with AWS KMS (SSE-KMS)": "To upload or download an object encrypted with
                # an AWS KMS key ... you need kms:GenerateDataKey and kms:Decrypt permissions on the key."
                iam.PolicyStatement(
                    actions=["kms:GenerateDataKey", "kms:Decrypt"],
                    resources=[key.key_arn],
                    conditions={"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}},
                ),
            ],
        )
        acknowledge(
            self.writer_policy,
            "Offloaded geometries are content-addressed objects (geometries/<sha256>.geojson) whose names exist "
            "only when a writer computes them: the grant is to that prefix of the geometry bucket alone.",
            f"AwsSolutions-IAM5[Resource::{finding_resource(self, geometries)}]",
        )
        self.reader_policies: dict[str, iam.ManagedPolicy] = {}
        for reader in read_roles:
            grants = reader_grants(domain_arn, reader.schemas)
            policy = iam.ManagedPolicy(
                self,
                reader_policy_id(reader.name),
                description=f"Read role {reader.name}: searches, counts and gets through its schemas' read "
                "aliases (docs/operations.md, Read roles)",
                statements=[
                    iam.PolicyStatement(actions=actions, resources=resources) for actions, resources in grants
                ],
            )
            acknowledge(
                policy,
                f"Read role {reader.name} gets documents by id through its schemas' read aliases, whose ids "
                "(<pk>#<sk>) exist only at run time; searches and counts are named exactly.",
                *(
                    f"AwsSolutions-IAM5[Resource::{finding_resource(self, resource)}]"
                    for _, resources in grants
                    for resource in resources
                    if resource.endswith("*")
                ),
            )
            self.reader_policies[reader.name] = policy

    @property
    def reader_policy_arns(self) -> Mapping[str, str]:
        return {name: policy.managed_policy_arn for name, policy in self.reader_policies.items()}
