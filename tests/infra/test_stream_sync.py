"""The stream sync: function settings, environment, event source mapping, dead-letter queue and exact permissions.

The stateless stack reaches the stateful stack's resources through SSM parameters; ``resolve`` replaces each with
the value the stateful stack writes, so expectations can name the stateful stack's resources directly.
"""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match
from refdata.registry import COUNTER, REGISTRY, indexable_schemas

from infra.config import EnvironmentConfig
from infra.constructs.vpc_function import ENI_ACTIONS
from infra.handoff import stream_parameter
from tests.infra.templates_helpers import (
    FUNCTION,
    MANAGED_POLICY,
    MAPPING,
    QUEUE,
    STREAM_READ_ACTIONS,
    SYNC_HANDLER,
    SYNC_ROLE_DESCRIPTION,
    TLS_ONLY,
    XRAY_ACTIONS,
    admitted_prefixes,
    allow,
    allow_each,
    aws_arn,
    data_key_arn,
    dead_letter_queue_id,
    domain_endpoint,
    expected_schema_tables,
    geometry_bucket,
    handed_over,
    mappings,
    one,
    permissions,
    policy_attached_to,
    resolve,
    role_arn,
    s3_arn,
    schema_tables,
    stream_arns,
    sync_function,
)
from tests.support.retention import removal_policies
from tests.support.template import Template


def test_function_sizing_follows_config(stateless: Template, config: EnvironmentConfig) -> None:
    sizing = {"MemorySize": config.sync.memory_mb, "Timeout": config.sync.timeout_seconds}
    stateless.has_resource_properties(FUNCTION, {"Handler": SYNC_HANDLER, **sizing})


def test_function_assumes_the_sync_role(stateful: Template, stateless: Template) -> None:
    _, function = sync_function(stateless)
    assert resolve(stateful, stateless, function["Properties"]["Role"]) == role_arn(
        stateful, SYNC_ROLE_DESCRIPTION
    )


def test_function_environment_is_exactly_the_documented_variables(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, function = sync_function(stateless)
    variables = resolve(stateful, stateless, function["Properties"]["Environment"]["Variables"])
    namespace = variables.pop("METRICS_NAMESPACE")
    assert isinstance(namespace, str) and namespace
    tables = schema_tables(stateful, stateless, variables.pop("SCHEMA_TABLES"))
    assert tables == expected_schema_tables(stateful, config)
    assert variables == {
        "OPENSEARCH_ENDPOINT": {"Fn::Join": ["", ["https://", domain_endpoint(stateful)]]},
        "DLQ_URL": {"Ref": dead_letter_queue_id(stateless)},
        "GEOMETRY_BUCKET": {"Ref": geometry_bucket(stateful)},
        "BULK_MAX_BYTES": str(config.search.bulk_max_bytes),
        "REQUEST_TIMEOUT_SECONDS": str(config.sync.request_timeout_seconds),
        "MAX_RECORD_AGE_SECONDS": str(config.sync.max_record_age_seconds),
        # A dimension of every sync metric beside the table: alarms read one environment's.
        "ENVIRONMENT_NAME": config.name,
    }


def test_function_starts_only_after_the_index_bootstrap(stateless: Template) -> None:
    bootstrap_id, _ = one(stateless, "Custom::OpenSearchIndexBootstrap")
    stateless.has_resource(
        FUNCTION, {"Properties": {"Handler": SYNC_HANDLER}, "DependsOn": Match.array_with([bootstrap_id])}
    )


# --- event source mapping -----------------------------------------------------------------------------------


def test_one_mapping_per_table_reads_its_stream_into_the_one_function(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    stateless.resource_count_is(MAPPING, len(config.source_tables))
    found = mappings(stateful, stateless, config)
    function_id, _ = sync_function(stateless)
    assert list(found) == [plan.construct_id for plan in config.source_tables]
    assert all(mapping["FunctionName"] == {"Ref": function_id} for mapping in found.values())
    handlers = [f["Properties"].get("Handler") for f in stateless.find_resources(FUNCTION).values()]
    assert handlers.count(SYNC_HANDLER) == 1  # not a function per table


def test_every_mapping_reports_partial_batch_failures_and_bisects(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    for mapping in mappings(stateful, stateless, config).values():
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert (mapping["BisectBatchOnFunctionError"], mapping["StartingPosition"]) == (True, "TRIM_HORIZON")


def test_every_mappings_batching_and_retries_follow_config(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    sync = config.sync
    expected = (sync.max_record_age_seconds, sync.batch_size, sync.batching_window_seconds)
    for mapping in mappings(stateful, stateless, config).values():
        assert tuple(mapping[key] for key in SYNC_SETTINGS) == (*expected, sync.parallelization_factor)


SYNC_SETTINGS = (
    "MaximumRecordAgeInSeconds",
    "BatchSize",
    "MaximumBatchingWindowInSeconds",
    "ParallelizationFactor",
)


def test_every_mapping_holds_a_systemic_fault_until_the_record_age_bound_never_by_count(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """docs/sync.md promises that a systemic fault holds the shard until the maximum record age, near which the
    handler dead-letters each record with its payload. A partial batch response counts as a retry attempt, so a
    finite MaximumRetryAttempts (10 before issue 18) ended the hold after a few invocations and discarded the batch
    with its stream range only."""
    _, function = sync_function(stateless)
    handler_age = int(function["Properties"]["Environment"]["Variables"]["MAX_RECORD_AGE_SECONDS"])
    for mapping in mappings(stateful, stateless, config).values():
        assert mapping["MaximumRetryAttempts"] == -1
        assert mapping["MaximumRecordAgeInSeconds"] == handler_age == config.sync.max_record_age_seconds


def test_the_worst_batch_a_mapping_delivers_drains_within_the_record_age_bound(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    """The worst batch: `batch_size` records each naming a geometry object at the bulk cap. An invocation holds
    lines within the work budget (a slice) and completes at least one slice; each redelivery is a retry attempt
    and lasts at most the timeout. All of them must end before the handler's dead-letter age."""
    from stream_sync.config import RECORD_AGE_MARGIN_SECONDS, budget_for_memory, worst_batch_invocations

    _, function = sync_function(stateless)
    properties = function["Properties"]
    variables = properties["Environment"]["Variables"]
    for mapping in mappings(stateful, stateless, config).values():
        invocations = worst_batch_invocations(
            mapping["BatchSize"],
            bulk_max_bytes=int(variables["BULK_MAX_BYTES"]),
            work_budget_bytes=budget_for_memory(properties["MemorySize"]),
        )
        assert invocations * properties["Timeout"] <= (
            mapping["MaximumRecordAgeInSeconds"] - RECORD_AGE_MARGIN_SECONDS
        ), invocations


def test_mapping_sends_what_it_gives_up_on_to_the_dead_letter_queue(stateless: Template) -> None:
    queue_id = dead_letter_queue_id(stateless)
    assert queue_id in stateless.find_resources(QUEUE)
    _, function = sync_function(stateless)
    assert function["Properties"]["Environment"]["Variables"]["DLQ_URL"] == {"Ref": queue_id}


def every_admitted_prefix(stateful: Template, stateless: Template, config: EnvironmentConfig) -> list[str]:
    return [
        p for mapping in mappings(stateful, stateless, config).values() for p in admitted_prefixes(mapping)
    ]


def test_each_tables_filter_admits_exactly_its_own_indexable_schemas(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    found = mappings(stateful, stateless, config)
    for plan in config.source_tables:
        assert plan.indexable_schemas
        assert admitted_prefixes(found[plan.construct_id]) == [f"{name}::" for name in plan.indexable_schemas]
    assert sorted(every_admitted_prefix(stateful, stateless, config)) == sorted(
        f"{schema.name}::" for schema in indexable_schemas()
    )  # together every indexable schema, each admitted by one table only


def test_no_filter_admits_counter_items(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    assert COUNTER in REGISTRY and not REGISTRY[COUNTER].indexable
    counter_pk = f"{COUNTER}::geozone::collection-1"
    assert not any(counter_pk.startswith(p) for p in every_admitted_prefix(stateful, stateless, config))


def test_no_filter_admits_a_non_indexable_schema(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    skipped = [schema.name for schema in REGISTRY.values() if not schema.indexable]
    assert skipped
    admitted = every_admitted_prefix(stateful, stateless, config)
    for name in skipped:
        assert not any(f"{name}::x".startswith(prefix) for prefix in admitted), name


# --- dead-letter queue --------------------------------------------------------------------------------------


def dead_letter_queue(stateless: Template) -> dict[str, Any]:
    return stateless.find_resources(QUEUE)[dead_letter_queue_id(stateless)]


def test_dead_letter_queue_is_encrypted_with_the_data_key(stateful: Template, stateless: Template) -> None:
    key = dead_letter_queue(stateless)["Properties"]["KmsMasterKeyId"]
    assert resolve(stateful, stateless, key) == data_key_arn(stateful)


def test_dead_letter_queue_keeps_messages_fourteen_days(stateless: Template) -> None:
    assert dead_letter_queue(stateless)["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_dead_letter_queue_is_retained_with_the_data(stateless: Template, config: EnvironmentConfig) -> None:
    queue = dead_letter_queue(stateless)
    assert (queue["DeletionPolicy"], queue["UpdateReplacePolicy"]) == removal_policies(config)


def test_dead_letter_queue_policy_denies_requests_without_tls(stateless: Template) -> None:
    queue_id = dead_letter_queue_id(stateless)
    deny = {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "sqs:*", "Condition": TLS_ONLY}
    statement = {**deny, "Resource": {"Fn::GetAtt": [queue_id, "Arn"]}}
    stateless.has_resource_properties(
        "AWS::SQS::QueuePolicy", {"Queues": [{"Ref": queue_id}], "PolicyDocument": {"Statement": [statement]}}
    )


# --- permissions --------------------------------------------------------------------------------------------


def test_sync_role_has_exactly_the_permissions_it_needs(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    _, function = sync_function(stateless)
    log_group_id = function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    sync_role = {"Ref": one(stateful, "AWS::IAM::Role", {"Description": SYNC_ROLE_DESCRIPTION})[0]}
    policy = resolve(
        stateful, stateless, policy_attached_to(stateless, stateful, sync_role)["PolicyDocument"]
    )
    assert permissions(policy) == (
        allow(["logs:CreateLogStream", "logs:PutLogEvents"], {"Fn::GetAtt": [log_group_id, "Arn"]})
        | allow(ENI_ACTIONS + XRAY_ACTIONS, "*")
        | allow_each(STREAM_READ_ACTIONS, list(stream_arns(stateful, config).values()))
        | allow(["dynamodb:ListStreams"], "*")
        | allow(["s3:GetObject"], s3_arn(geometry_bucket(stateful), "/geometries/*"))
        | allow(["sqs:SendMessage"], {"Fn::GetAtt": [dead_letter_queue_id(stateless), "Arn"]})
        | allow(["kms:Decrypt", "kms:GenerateDataKey"], data_key_arn(stateful))
        | allow(["es:ESHttpPost"], aws_arn("es", f":domain/{config.search.domain_name}/_bulk"))
    )


def test_sync_role_has_no_other_policy(stateful: Template) -> None:
    sync_role_id = one(stateful, "AWS::IAM::Role", {"Description": SYNC_ROLE_DESCRIPTION})[0]
    role = stateful.find_resources("AWS::IAM::Role")[sync_role_id]["Properties"]
    assert "Policies" not in role and "ManagedPolicyArns" not in role
    attached_in_stateful = [
        policy
        for policy in stateful.find_resources(MANAGED_POLICY).values()
        if {"Ref": sync_role_id} in policy["Properties"].get("Roles", [])
    ]
    assert attached_in_stateful == []


def test_no_stack_has_inline_policies(stateful: Template, stateless: Template) -> None:
    for template in (stateful, stateless):
        template.resource_count_is("AWS::IAM::Policy", 0)


def test_no_managed_policy_grants_a_wildcard_action(stateful: Template, stateless: Template) -> None:
    for template in (stateful, stateless):
        for logical_id, policy in template.find_resources(MANAGED_POLICY).items():
            for _, action, _ in permissions(policy["Properties"]["PolicyDocument"]):
                assert "*" not in action, f"{logical_id}: {action}"


def test_each_tables_stream_is_handed_over_and_the_main_tables_parameter_keeps_its_name(
    stateful: Template, config: EnvironmentConfig
) -> None:
    written = handed_over(stateful)
    prefix = f"/refdata/{config.name}/stateful/"
    streams = {name: value for name, value in written.items() if name.endswith("stream-arn")}
    assert streams == {
        f"{prefix}{stream_parameter(construct_id)}": arn
        for construct_id, arn in stream_arns(stateful, config).items()
    }
    assert streams[f"{prefix}table-stream-arn"] == stream_arns(stateful, config)["Table"]
    assert stream_parameter("TableBookings") == "table-bookings-stream-arn"
    assert stream_parameter("TableBookingArchive") == "table-booking-archive-stream-arn"
