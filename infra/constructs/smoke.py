"""What the smoke run (``python -m ops smoke``, ``lambdas/ops/smoke.py``) needs beyond the ops workflows it runs in:

- the ops worker may write, update and delete canaries, and only canaries (``dynamodb:LeadingKeys`` of each
  table's canary scopes), read each table's event source mapping (its state is part of a verdict) and assume the
  readers' probe roles; it learns the mappings, the readers and its wait from environment variables;
- a **probe role** per configured read role (``<domain>-probe-<reader>``): mapped to that read role alone by the
  index bootstrap and admitted by the domain's access policy exactly as the reader's own roles are, so signing as
  it shows what that reader sees; only the ops worker may assume it, and its identity policy allows exactly the
  reader's read-alias requests (the access policy names the account, which only delegates to that policy);
- the **smoke runner role** (``<domain>-smoke-runner``) the deploy workflow assumes after ``cdk deploy``: it may
  find the two stacks' outputs, start and follow the smoke workflow and read its run records, nothing else.
  Its trust admits the environment's ``deploy_role``, matched by name (``aws:PrincipalArn``), so the role need not
  exist yet when the stack is deployed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from refdata.reserved import CANARY, scope_prefix

from infra.config import SMOKE_WAIT_SECONDS
from infra.constructs.search_domain import reader_grants
from infra.constructs.stream_sync import SyncedTable
from infra.iam import attach_policy
from infra.nag import acknowledge, finding_resource

# What the ops worker gets for the smoke run (lambdas/ops/smoke.py, SmokeSettings) and the policy that lets it.
SMOKE_VARIABLES = ("EVENT_SOURCE_MAPPINGS", "SMOKE_READERS", "SMOKE_WAIT_SECONDS", "SMOKE_STARTUP_MINUTES")
SMOKE_WORKER_POLICY = "SmokeWorkerSmokePolicy"


@dataclass(frozen=True)
class Probe:
    """A configured read role and the name of the probe role that sees what it sees."""

    reader: str
    schemas: Sequence[str]
    role_name: str


def canary_keys(schemas: Sequence[str]) -> list[str]:
    """The partition keys a canary of these schemas may have, as `dynamodb:LeadingKeys` patterns."""
    patterns = []
    for schema in schemas:
        prefix = scope_prefix(schema, CANARY)
        patterns.append(f"{prefix}*" if prefix.endswith("::") else prefix)
    return patterns


def event_source_mappings(
    function: lambda_.Function, tables: Sequence[SyncedTable]
) -> dict[str, lambda_.EventSourceMapping]:
    """Each table's event source mapping of the sync function (table name -> mapping), found among the function's
    children by the stream it reads."""
    found = {}
    for synced in tables:
        for child in function.node.children:
            resource = child.node.default_child
            if (
                isinstance(child, lambda_.EventSourceMapping)
                and isinstance(resource, lambda_.CfnEventSourceMapping)
                and resource.event_source_arn == synced.table.table_stream_arn
            ):
                found[synced.table.table_name] = child
    assert len(found) == len(tables), "every source table has its event source mapping"
    return found


class SmokeAccess(Construct):
    """The probe roles, the smoke runner role, and the ops worker's smoke permissions and settings."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        worker: lambda_.Function,
        worker_role: iam.IRole,
        tables: Sequence[SyncedTable],
        sync_function: lambda_.Function,
        probes: Sequence[Probe],
        domain: str,
        key: kms.IKey,
        state_machine: sfn.IStateMachine,
        state_machine_name: str,
        ops_bucket: s3.IBucket,
        stack_names: Sequence[str],
        runner_role_name: str,
        deploy_role_arn: str,
        startup_minutes: int,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.probe_roles = {
            probe.reader: iam.Role(
                self,
                f"Probe-{probe.reader}",
                role_name=probe.role_name,
                assumed_by=iam.ArnPrincipal(worker_role.role_arn),
                description=f"Smoke run: sees what read role {probe.reader} sees (mapped to it alone)",
                max_session_duration=Duration.hours(1),
            )
            for probe in probes
        }
        for probe in probes:
            # The domain's access policy names the account with an aws:PrincipalArn condition: in one account that
            # only delegates to the caller's identity policy, so without this grant a probe's search gets 403.
            grants = reader_grants(domain, probe.schemas)
            policy = attach_policy(
                self,
                f"ProbePolicy-{probe.reader}",
                self.probe_roles[probe.reader],
                [iam.PolicyStatement(actions=actions, resources=resources) for actions, resources in grants],
            )
            acknowledge(
                policy,
                f"The probe reads what read role {probe.reader} reads: documents by id through its schemas' read "
                "aliases, whose ids (<pk>#<sk>) exist only at run time; searches and counts are named exactly.",
                *(
                    f"AwsSolutions-IAM5[Resource::{finding_resource(self, resource)}]"
                    for _, resources in grants
                    for resource in resources
                    if resource.endswith("*")
                ),
            )
        mappings = event_source_mappings(sync_function, tables)
        worker.add_environment(
            "EVENT_SOURCE_MAPPINGS",
            stack.to_json_string(
                {table: mapping.event_source_mapping_id for table, mapping in mappings.items()}
            ),
        )
        worker.add_environment(
            "SMOKE_READERS",
            stack.to_json_string(
                [
                    {
                        "name": probe.reader,
                        "schemas": list(probe.schemas),
                        "probeRoleArn": self.probe_roles[probe.reader].role_arn,
                    }
                    for probe in probes
                ]
            ),
        )
        worker.add_environment("SMOKE_WAIT_SECONDS", str(SMOKE_WAIT_SECONDS))
        # A first deploy's start-up budget (config: ops.smoke_startup_minutes).
        worker.add_environment("SMOKE_STARTUP_MINUTES", str(startup_minutes))
        mapping_arns = [
            f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:event-source-mapping:"
            f"{mapping.event_source_mapping_id}"
            for mapping in mappings.values()
        ]
        statements = [
            iam.PolicyStatement(
                actions=["dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                resources=[synced.table.table_arn],
                conditions={
                    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": canary_keys(synced.indexable_schemas)}
                },
            )
            for synced in tables
        ]
        statements += [
            iam.PolicyStatement(
                actions=["kms:Encrypt", "kms:DescribeKey"],
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"dynamodb.{Aws.REGION}.amazonaws.com"}},
            ),
            iam.PolicyStatement(actions=["lambda:GetEventSourceMapping"], resources=mapping_arns),
        ]
        if probes:
            statements.append(
                iam.PolicyStatement(
                    actions=["sts:AssumeRole"],
                    resources=[role.role_arn for role in self.probe_roles.values()],
                )
            )
        self.worker_policy = attach_policy(self, "WorkerSmokePolicy", worker_role, statements)
        self._runner(
            runner_role_name,
            deploy_role_arn,
            state_machine,
            state_machine_name,
            ops_bucket,
            key,
            stack_names,
        )

    def _runner(
        self,
        role_name: str,
        deploy_role_arn: str,
        state_machine: sfn.IStateMachine,
        state_machine_name: str,
        ops_bucket: s3.IBucket,
        key: kms.IKey,
        stack_names: Sequence[str],
    ) -> None:
        account = deploy_role_arn.split(":")[4]
        self.runner_role = iam.Role(
            self,
            "RunnerRole",
            role_name=role_name,
            assumed_by=iam.PrincipalWithConditions(
                iam.AccountPrincipal(account), {"ArnEquals": {"aws:PrincipalArn": deploy_role_arn}}
            ),
            description="The deploy workflow's post-deploy smoke run (python -m ops smoke --assume-role)",
            max_session_duration=Duration.hours(1),
        )
        runs = ops_bucket.arn_for_objects("runs/smoke/*")
        executions = (
            f"arn:{Aws.PARTITION}:states:{Aws.REGION}:{Aws.ACCOUNT_ID}:execution:{state_machine_name}:*"
        )
        stacks = [
            f"arn:{Aws.PARTITION}:cloudformation:{Aws.REGION}:{Aws.ACCOUNT_ID}:stack/{name}/*"
            for name in stack_names
        ]
        self.runner_policy = attach_policy(
            self,
            "RunnerPolicy",
            self.runner_role,
            [
                iam.PolicyStatement(actions=["cloudformation:DescribeStacks"], resources=stacks),
                iam.PolicyStatement(
                    actions=["states:StartExecution"], resources=[state_machine.state_machine_arn]
                ),
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:GetExecutionHistory"], resources=[executions]
                ),
                iam.PolicyStatement(actions=["s3:GetObject"], resources=[runs]),
                # Unconditioned: the CLI reads records that may not exist yet, and S3 answers such a read with 403
                # instead of 404 unless the caller may list the bucket (a prefix condition does not count).
                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[ops_bucket.bucket_arn]),
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[key.key_arn]),
            ],
        )
        acknowledge(
            self.runner_policy,
            "A smoke run's records live under runs/smoke/<run id>/ and its execution is named by its run id: both "
            "exist only at run time, so the grants are to the smoke workflow's prefix and executions only; the "
            "stacks' ids are assigned by CloudFormation.",
            *(
                f"AwsSolutions-IAM5[Resource::{finding_resource(self, arn)}]"
                for arn in (runs, executions, *stacks)
            ),
        )
