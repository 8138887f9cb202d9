"""The alarms that page, the "platform degraded" composite over them, and the dashboard that explains them.

Every alarm has the dimensions its metric is published with (so it evaluates), a deliberate missing-data treatment,
a threshold from ``MonitoringSettings``, an alarm and an OK action on the stateful stack's alarm topic, and a
description that links its section of docs/runbook.md. Alarm names are ``refdata-<env>-<Kind>[-<subject>]``; the
runbook has one section per kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct
from stream_sync.heartbeat import METRIC as HEARTBEAT_METRIC
from stream_sync.sync import Fate
from stream_sync.telemetry import FATE_METRICS

from infra.config import HeartbeatSettings, MonitoringSettings, SearchSettings
from infra.constructs.dashboard import Graph, OperationsDashboard, Section
from infra.constructs.heartbeat import DUE_METRIC, dimensions

RUNBOOK = "docs/runbook.md"
DOMAIN_NAMESPACE = "AWS/ES"
MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
GTE = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
# A metric published every period while its resource runs: a gap means "unknown", never "healthy".
GAUGE = cloudwatch.TreatMissingData.MISSING
# A metric published only when something happens (throttles, errors, KMS trouble) or while there is traffic
# (invocations, batches, requests): no data means nothing happened.
EVENT = cloudwatch.TreatMissingData.NOT_BREACHING
# The domain's yes/no metrics: an alarm at 1, kind -> (period, missing data, what it means).
DOMAIN_FLAGS = {
    "ClusterIndexWritesBlocked": (
        FIVE_MINUTES,
        GAUGE,
        "The domain refuses writes: the sync holds every record until writes resume.",
    ),
    "AutomatedSnapshotFailure": (
        MINUTE,
        GAUGE,
        "An hourly automated snapshot failed (often because the cluster is red).",
    ),
    "KMSKeyError": (
        MINUTE,
        EVENT,
        "The data key that encrypts the domain at rest is disabled: the domain cannot read data.",
    ),
    "KMSKeyInaccessible": (
        MINUTE,
        EVENT,
        "The data key is deleted or its grants are revoked: the domain cannot be recovered in place.",
    ),
}
# DynamoDB operations whose SystemErrors are summed: the item and transaction calls writers, the redrive and the
# ops tools make (CloudWatch allows ten metrics in one alarm). The stream's GetRecords is published with a
# StreamLabel dimension and its failures surface as the sync's iterator age.
TABLE_OPERATIONS = (
    dynamodb.Operation.GET_ITEM,
    dynamodb.Operation.BATCH_GET_ITEM,
    dynamodb.Operation.QUERY,
    dynamodb.Operation.SCAN,
    dynamodb.Operation.PUT_ITEM,
    dynamodb.Operation.UPDATE_ITEM,
    dynamodb.Operation.DELETE_ITEM,
    dynamodb.Operation.BATCH_WRITE_ITEM,
    dynamodb.Operation.TRANSACT_WRITE_ITEMS,
    dynamodb.Operation.TRANSACT_GET_ITEMS,
)


@dataclass(frozen=True)
class WatchedHeartbeat:
    """The heartbeat's alarms: two per source table (its label in alarm names, the table), on the sync's
    ``HeartbeatLagSeconds`` and the schedules' ``HeartbeatsDue`` (infra/constructs/heartbeat.py);
    ``startup_seconds`` is how long a new event source mapping may take to start polling
    (``ops.smoke_startup_minutes``, in seconds), which ``HeartbeatMissing`` waits out."""

    settings: HeartbeatSettings
    tables: Sequence[tuple[str, dynamodb.ITable]]
    startup_seconds: int


@dataclass(frozen=True)
class WatchedTable:
    """A source table: its label in alarm names ("" for the main table, else its config name), the table, its
    global secondary indexes, and the id of the event source mapping that syncs its stream."""

    label: str
    table: dynamodb.ITable
    indexes: Sequence[str]
    sync_mapping_id: str | None = None


def alarm_name(environment: str, kind: str, subject: str | None = None) -> str:
    return "-".join(part for part in ("refdata", environment, kind, subject) if part)


class Monitoring(Construct):
    """Alarms on the search domain, each source table, the stream sync, the dead-letter queues and the ops workflows
    of one environment.

    Subscribe on-call to the stateful stack's alarm topic (output ``AlarmTopicArn``); to receive only the
    composite "platform degraded" signal, give the subscription a message-body filter on its ``AlarmName``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        environment: str,
        account: str,
        settings: MonitoringSettings,
        topic: sns.ITopic,
        search: SearchSettings,
        tables: Sequence[WatchedTable],
        sync_function: lambda_.IFunction,
        sync_timeout: Duration,
        sync_metrics_namespace: str,
        dead_letter_queues: Mapping[str, sqs.IQueue],
        ops_workflows: Mapping[str, sfn.IStateMachine],
        heartbeat: WatchedHeartbeat | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._environment = environment
        self._settings = settings
        self._action = actions.SnsAction(topic)
        self.alarms: list[cloudwatch.Alarm] = []
        sections = [
            self._watch_domain(search, account),
            *(self._watch_table(watched) for watched in tables),
            self._watch_sync(sync_function, sync_timeout, sync_metrics_namespace, tables),
            *([self._watch_heartbeat(heartbeat, sync_function, sync_metrics_namespace)] if heartbeat else []),
            self._watch_queues(dead_letter_queues),
            self._watch_ops(ops_workflows),
        ]
        self.composite = cloudwatch.CompositeAlarm(
            self,
            "PlatformDegraded",
            composite_alarm_name=alarm_name(environment, "PlatformDegraded"),
            alarm_rule=cloudwatch.AlarmRule.any_of(*self.alarms),
            alarm_description=_described(
                "PlatformDegraded",
                f"At least one of the {len(self.alarms)} alarms of {environment} is in ALARM.",
            ),
        )
        self.composite.add_alarm_action(self._action)
        self.composite.add_ok_action(self._action)
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            name=alarm_name(environment, "operations"),
            overview=self.composite,
            sections=sections,
        )

    # --- the parts --------------------------------------------------------------------------------------------

    def _watch_domain(self, search: SearchSettings, account: str) -> Section:
        """AWS's recommended alarms for OpenSearch Service, with both dimensions the service publishes."""
        settings = self._settings

        def metric(name: str, statistic: str, period: Duration = MINUTE) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=DOMAIN_NAMESPACE,
                metric_name=name,
                dimensions_map={"DomainName": search.domain_name, "ClientId": account},
                statistic=statistic,
                period=period,
            )

        red = metric("ClusterStatus.red", "Maximum")
        yellow = metric("ClusterStatus.yellow", "Maximum")
        nodes = metric("Nodes", "Minimum", Duration.days(1))
        free_storage = metric("FreeStorageSpace", "Minimum")
        flags = {kind: metric(kind, "Maximum", period) for kind, (period, _, _) in DOMAIN_FLAGS.items()}
        new_rejections = cloudwatch.MathExpression(
            expression="DIFF(rejected)",
            using_metrics={"rejected": metric("ThreadpoolWriteRejected", "Sum")},
            label="New write rejections",
            period=MINUTE,
        )
        server_errors = cloudwatch.MathExpression(
            expression="100 * errors / requests",
            using_metrics={"errors": metric("5xx", "Sum"), "requests": metric("OpenSearchRequests", "Sum")},
            label="5xx, % of requests",
            period=MINUTE,
        )
        free_storage_mib = search.volume_size_gib * 1024 * settings.free_storage_percent / 100
        node_count = search.data_node_count + search.master_node_count
        alarms = [
            self._alarm(
                "ClusterStatusRed",
                red,
                threshold=1,
                # Only a running domain reports its health: silence is an outage, not a green cluster.
                missing=cloudwatch.TreatMissingData.BREACHING,
                summary="A primary shard is unassigned: its documents can be neither searched nor written.",
            ),
            self._alarm(
                "ClusterStatusYellow",
                yellow,
                threshold=1,
                evaluation_periods=5,
                missing=GAUGE,
                summary="A replica shard has been unassigned for 5 minutes: one more node loss can lose data.",
            ),
            self._alarm(
                "Nodes",
                nodes,
                threshold=node_count,
                comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                missing=GAUGE,
                summary=f"Fewer than the {node_count} configured nodes answered at some point in the last day.",
            ),
            self._alarm(
                "FreeStorageSpace",
                free_storage,
                threshold=free_storage_mib,
                comparison=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
                missing=GAUGE,
                summary=f"A data node has {settings.free_storage_percent} % or less of its "
                f"{search.volume_size_gib} GiB volume free; writes are blocked at the flood stage.",
            ),
            self._alarm(
                "ThreadpoolWriteRejected",
                new_rejections,
                threshold=settings.write_rejections,
                missing=GAUGE,
                summary="The domain's write thread pools rejected requests (HTTP 429): the sync retries them.",
            ),
            self._alarm(
                "Domain5xx",
                server_errors,
                threshold=settings.server_error_percent,
                missing=EVENT,
                summary=f"{settings.server_error_percent} % or more of the domain's requests failed with a 5xx "
                "in a minute.",
            ),
        ]
        graphs = [
            Graph("Cluster health", [red, yellow, metric("ClusterStatus.green", "Maximum")], right=[nodes]),
            Graph("Free storage of the fullest node (MiB)", [free_storage], threshold=free_storage_mib),
            Graph("Writes refused", [new_rejections, flags["ClusterIndexWritesBlocked"]]),
            Graph("Requests and 5xx", [metric("OpenSearchRequests", "Sum")], right=[server_errors]),
        ]
        alarms += [
            self._alarm(kind, flags[kind], threshold=1, missing=missing, summary=summary)
            for kind, (_, missing, summary) in DOMAIN_FLAGS.items()
        ]
        roles = [("", "A data node")] + (
            [("Master", "A dedicated master")] if search.master_node_count else []
        )
        for role, who in roles:
            pressure, graph = self._watch_pressure(metric, role, who)
            alarms += pressure
            graphs.append(graph)
        return Section(f"Search domain {search.domain_name}", graphs, alarms)

    def _watch_pressure(
        self, metric: Callable[..., cloudwatch.Metric], role: str, who: str
    ) -> tuple[list[cloudwatch.Alarm], Graph]:
        """CPU, JVM heap and old-generation pressure of the data nodes (``role`` "") or of the dedicated masters
        ("Master"); thresholds ``[master_]cpu_percent``, ``[master_]jvm_memory_pressure_percent``, ..."""
        limit = {
            name: getattr(self._settings, f"{role.lower()}_{name}_percent".lstrip("_"))
            for name in ("cpu", "jvm_memory_pressure", "old_gen_jvm_memory_pressure")
        }
        cpu = metric(f"{role}CPUUtilization", "Maximum", Duration.minutes(15))
        jvm = metric(f"{role}JVMMemoryPressure", "Maximum")
        old_gen = metric(f"{role}OldGenJVMMemoryPressure", "Maximum")
        alarms = [
            self._alarm(
                f"{role}CPUUtilization",
                cpu,
                threshold=limit["cpu"],
                evaluation_periods=3,
                missing=GAUGE,
                summary=f"{who}'s CPU has reached {limit['cpu']} % in each of the last three 15-minute periods.",
            ),
            self._alarm(
                f"{role}JVMMemoryPressure",
                jvm,
                threshold=limit["jvm_memory_pressure"],
                evaluation_periods=3,
                missing=GAUGE,
                summary=f"{who}'s JVM heap is {limit['jvm_memory_pressure']} % full for 3 minutes: "
                "out-of-memory errors and refused requests follow.",
            ),
            self._alarm(
                f"{role}OldGenJVMMemoryPressure",
                old_gen,
                threshold=limit["old_gen_jvm_memory_pressure"],
                evaluation_periods=3,
                missing=GAUGE,
                summary=f"{who}'s old generation is {limit['old_gen_jvm_memory_pressure']} % full for 3 minutes: "
                "garbage collection no longer frees memory.",
            ),
        ]
        nodes = who.removeprefix("A ").capitalize()
        return alarms, Graph(f"{nodes}s: CPU, heap, old generation (%)", [cpu, jvm, old_gen])

    def _watch_table(self, watched: WatchedTable) -> Section:
        """Throttled reads and writes of the table and of each index, and DynamoDB's own errors. The main table's
        alarms have no subject (``refdata-<env>-TableReadThrottles``), another table's are subject to its label
        (``...-TableReadThrottles-Bookings``, ``...-IndexReadThrottles-Bookings-globalId``)."""
        table, label = watched.table, watched.label
        threshold = self._settings.throttle_events
        throttles: list[cloudwatch.IMetric] = []
        alarms = []
        for index in (None, *watched.indexes):
            dimensions = {"TableName": table.table_name}
            if index is not None:
                dimensions["GlobalSecondaryIndexName"] = index
            for access in ("Read", "Write"):
                throttled = table.metric(
                    f"{access}ThrottleEvents", dimensions_map=dimensions, statistic="Sum", period=FIVE_MINUTES
                )
                throttles.append(throttled.with_(label=f"{access} {index or 'table'}"))
                table_words = f"the {label} table" if label else "the table"
                whose = f"the index {index}{f' of {table_words}' if label else ''}" if index else table_words
                consequence = (
                    "; a throttled index also throttles the table's writes"
                    if index and access == "Write"
                    else ""
                )
                alarms.append(
                    self._alarm(
                        f"{'Index' if index else 'Table'}{access}Throttles",
                        throttled,
                        subject="-".join(part for part in (label, index) if part) or None,
                        threshold=threshold,
                        missing=EVENT,
                        summary=f"{access}s of {whose} were throttled {threshold} or more times in 5 minutes"
                        f"{consequence}.",
                    )
                )
        system_errors = table.metric_system_errors_for_operations(
            operations=list(TABLE_OPERATIONS), period=FIVE_MINUTES
        )
        alarms.append(
            self._alarm(
                "TableSystemErrors",
                system_errors,
                subject=label or None,
                threshold=self._settings.table_system_errors,
                missing=EVENT,
                summary=f"DynamoDB answered requests{f' to the {label} table' if label else ''} with HTTP 500 (its "
                "own fault); the SDKs retry them.",
            )
        )
        consumed = [
            table.metric_consumed_read_capacity_units(period=FIVE_MINUTES, label="Read units"),
            table.metric_consumed_write_capacity_units(period=FIVE_MINUTES, label="Write units"),
        ]
        graphs = [
            Graph("Consumed capacity", consumed),
            Graph("Throttle events", throttles),
            Graph("System errors", [system_errors]),
        ]
        return Section(f"DynamoDB table {label}".strip(), graphs, alarms)

    def _watch_sync(
        self, function: lambda_.IFunction, timeout: Duration, namespace: str, tables: Sequence[WatchedTable]
    ) -> Section:
        """The stream's lag, the function's health, and per source table the handler's own metrics (published with
        the dimensions Environment and Table, stream_sync.telemetry) and what its event source mapping gave up on."""
        settings = self._settings

        def emitted(
            name: str, watched: WatchedTable, statistic: str = "Sum", period: Duration = FIVE_MINUTES
        ) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=namespace,
                metric_name=name,
                dimensions_map={"Environment": self._environment, "Table": watched.table.table_name},
                statistic=statistic,
                period=period,
            )

        def labelled(metric: cloudwatch.Metric, watched: WatchedTable) -> cloudwatch.Metric:
            """For a graph (an alarm's metric has no label: CloudWatch would read it as a metric-math query)."""
            return metric.with_(label=f"{metric.metric_name} ({watched.label or 'main table'})")

        iterator_age = function.metric("IteratorAge", statistic="Maximum", period=MINUTE)
        duration = function.metric_duration(statistic="Maximum", period=FIVE_MINUTES)
        errors = function.metric_errors(statistic="Sum", period=FIVE_MINUTES)
        throttles = function.metric_throttles(statistic="Sum", period=FIVE_MINUTES)
        duration_limit = timeout.to_milliseconds() * settings.duration_timeout_percent / 100
        alarms = [
            self._alarm(
                "SyncIteratorAge",
                iterator_age,
                threshold=settings.iterator_age_seconds * 1000,
                missing=EVENT,
                summary=f"Stream records waited {settings.iterator_age_seconds} s or more before the sync "
                "received them: OpenSearch lags DynamoDB.",
            ),
            self._alarm(
                "SyncErrors",
                errors,
                threshold=1,
                missing=EVENT,
                summary="An invocation failed (crash or timeout): Lambda retries or bisects its batch.",
            ),
            self._alarm(
                "SyncThrottles",
                throttles,
                threshold=1,
                missing=EVENT,
                summary="Invocations were throttled by the function's reserved concurrency or the account's.",
            ),
            self._alarm(
                "SyncDuration",
                duration,
                threshold=duration_limit,
                missing=EVENT,
                summary=f"An invocation ran {settings.duration_timeout_percent} % of the "
                f"{timeout.to_seconds():.0f} s timeout: the next one may be killed mid-batch.",
            ),
        ]
        lags: list[cloudwatch.Metric] = []
        script_errors: dict[str, cloudwatch.Metric] = {}
        discarded: list[cloudwatch.IMetric] = []
        fate_graphs = []
        for position, watched in enumerate(tables):
            subject = watched.label or None
            whose = f" of the {watched.label} table" if watched.label else ""
            lag = emitted("ReplicationLagSeconds", watched, "Maximum", MINUTE)
            fates = {fate: emitted(name, watched) for fate, name in FATE_METRICS.items()}
            lags.append(labelled(lag, watched))
            script_errors[f"scriptErrors{position}"] = labelled(emitted("ScriptErrors", watched), watched)
            fate_graphs.append(
                Graph(
                    f"Records by fate ({watched.label or 'main table'})",
                    [labelled(m, watched) for m in (*fates.values(), emitted("RecordsDeferred", watched))],
                    stacked=True,
                )
            )
            alarms += [
                self._alarm(
                    "SyncReplicationLag",
                    lag,
                    subject=subject,
                    threshold=settings.replication_lag_seconds,
                    missing=EVENT,
                    summary=f"Changes{whose} reached OpenSearch {settings.replication_lag_seconds} s or more after "
                    "they were made in DynamoDB.",
                ),
                self._alarm(
                    "SyncDeadLettered",
                    fates[Fate.DEAD_LETTERED],
                    subject=subject,
                    threshold=settings.dead_lettered_documents,
                    missing=EVENT,
                    summary=f"The sync dead-lettered records{whose}: they are in the DLQ with their reason, waiting "
                    "for a fix and a redrive.",
                ),
                self._alarm(
                    "SyncRecordsHeldForRetry",
                    fates[Fate.RETRY],
                    subject=subject,
                    threshold=settings.records_held_for_retry,
                    evaluation_periods=3,
                    missing=EVENT,
                    summary=f"For 15 minutes the sync's transient retries ran out and records{whose} went back to "
                    "Lambda: a systemic fault holds the shard.",
                ),
            ]
            if watched.sync_mapping_id is not None:
                # What the mapping gave up on: delivered to the DLQ as a range only, or (the DLQ unreachable) dropped
                # outright; DroppedEventCount leaves out what reached the on-failure destination.
                mapping = {"EventSourceMappingUUID": watched.sync_mapping_id}
                gave_up = {
                    f"{kind}{position}": cloudwatch.Metric(
                        namespace="AWS/Lambda",
                        metric_name=name,
                        dimensions_map=mapping,
                        statistic="Sum",
                        period=FIVE_MINUTES,
                    )
                    for kind, name in (
                        ("rangesSent", "OnFailureDestinationDeliveredEventCount"),
                        ("dropped", "DroppedEventCount"),
                    )
                }
                discarded_records = cloudwatch.MathExpression(
                    expression=" + ".join(f"FILL({name}, 0)" for name in gave_up),
                    using_metrics=gave_up,
                    label=f"Records discarded ({watched.label or 'main table'})",
                    period=FIVE_MINUTES,
                )
                discarded.append(discarded_records)
                alarms.append(
                    self._alarm(
                        "SyncRecordsDiscarded",
                        discarded_records,
                        subject=subject,
                        threshold=1,
                        missing=EVENT,
                        summary=f"The event source mapping{whose} gave up on records at the maximum record age and "
                        "sent only their stream range to the DLQ (or dropped them): redrive before the stream's "
                        "24-hour retention ends (within 18 hours of this alarm), or they are lost to the redrive.",
                    )
                )
        every_table = cloudwatch.MathExpression(
            expression=" + ".join(f"FILL({name}, 0)" for name in script_errors),
            using_metrics=script_errors,
            label="Script errors (every table)",
            period=FIVE_MINUTES,
        )
        alarms.append(
            self._alarm(
                "SyncScriptErrors",
                every_table,
                threshold=1,
                missing=EVENT,
                summary="The stored ordering script is missing, does not compile, or failed on a document.",
            )
        )
        seconds = cloudwatch.MathExpression(
            expression="age / 1000",
            using_metrics={"age": iterator_age},
            label="Iterator age (s)",
            period=MINUTE,
        )
        graphs = [
            Graph("Stream lag (s)", [seconds, *lags], threshold=settings.iterator_age_seconds),
            Graph(
                "Throughput",
                [function.metric_invocations(statistic="Sum", period=FIVE_MINUTES)],
                right=[
                    labelled(emitted(name, watched), watched)
                    for watched in tables
                    for name in ("BatchSize", "BulkRequests")
                ],
            ),
            *fate_graphs,
            Graph("Failures", [errors, throttles, *script_errors.values(), *discarded]),
            Graph("Duration (ms)", [duration], threshold=duration_limit),
        ]
        return Section("Stream sync", graphs, alarms)

    def _watch_heartbeat(
        self, heartbeat: WatchedHeartbeat, function: lambda_.IFunction, namespace: str
    ) -> Section:
        """Each table's heartbeat, in two alarms with one meaning each, neither of which breaches on missing data (so
        neither pages for the periods before a table's first heartbeat: a new environment, an added table).
        ``HeartbeatLag``: the heartbeats that arrive are slow. ``HeartbeatMissing``: heartbeats are due (the
        schedule's count, which does not pass through the pipeline) and none is indexed, in each of its evaluation
        periods: longer than a new mapping may take to start polling plus two intervals, so a deploy that creates or
        recreates a mapping does not page; it is how a disabled or stuck mapping, a sync that fails or is never
        invoked, an expired iterator, a blocked index or a heartbeat that is not written shows."""
        settings = heartbeat.settings
        period = Duration.minutes(settings.interval_minutes)
        missing_periods = settings.missing_alarm_periods(heartbeat.startup_seconds)
        lags = []
        counts: list[cloudwatch.IMetric] = []
        alarms = []
        for label, table in heartbeat.tables:
            lag = cloudwatch.Metric(
                namespace=namespace,
                metric_name=HEARTBEAT_METRIC,
                dimensions_map=dimensions(self._environment, table.table_name),
                statistic="Maximum",
                period=period,
            )
            due = cloudwatch.Metric(
                namespace=namespace,
                metric_name=DUE_METRIC,
                dimensions_map=dimensions(self._environment, table.table_name),
                statistic="SampleCount",
                period=period,
            )
            indexed = lag.with_(statistic="SampleCount")
            whose = f"the {label} table" if label else "the main table"
            lags.append(lag.with_(label=f"Heartbeat lag {label or 'main table'}"))
            counts += [
                due.with_(label=f"Due ({label or 'main table'})"),
                indexed.with_(label=f"Indexed ({label or 'main table'})"),
            ]
            # MATH: "When comparison operators are used between two time series, and only one of the time series has
            # a value for a particular time stamp, the function treats the missing value in the other time series
            # as 0": a period with a heartbeat due and none indexed is 1 (breaching), one with both is 0.
            unindexed = cloudwatch.MathExpression(
                expression="due > indexed",
                using_metrics={"due": due, "indexed": indexed},
                label=f"Heartbeats due, none indexed ({label or 'main table'})",
                period=period,
            )
            alarms += [
                self._alarm(
                    "HeartbeatLag",
                    lag,
                    subject=label or None,
                    threshold=settings.lag_alarm_seconds,
                    evaluation_periods=settings.alarm_periods,
                    missing=EVENT,
                    summary=f"For {settings.alarm_periods} heartbeats in a row, {whose}'s heartbeat reached the "
                    f"index {settings.lag_alarm_seconds} s or more after it was written: the pipeline is slow.",
                ),
                self._alarm(
                    "HeartbeatMissing",
                    unindexed,
                    subject=label or None,
                    threshold=1,
                    evaluation_periods=missing_periods,
                    missing=EVENT,
                    summary=f"In each of {missing_periods} intervals of {settings.interval_minutes} min, a heartbeat "
                    f"of {whose} was due and none reached the index (longer than a new event source mapping takes "
                    f"to start polling, {heartbeat.startup_seconds} s, plus two intervals): the pipeline has "
                    "stopped.",
                ),
            ]
        iterator_age = cloudwatch.MathExpression(
            expression="heartbeatIteratorAge / 1000",
            using_metrics={
                "heartbeatIteratorAge": function.metric("IteratorAge", statistic="Maximum", period=period)
            },
            label="Iterator age (s)",
            period=period,
        )
        graphs = [
            Graph(
                "Heartbeat lag beside iterator age (s)",
                [*lags, iterator_age],
                threshold=settings.lag_alarm_seconds,
            ),
            Graph("Heartbeats due and indexed (per interval)", counts),
        ]
        return Section("Heartbeat (end-to-end lag)", graphs, alarms)

    def _watch_queues(self, queues: Mapping[str, sqs.IQueue]) -> Section:
        alarms = []
        depths = []
        ages = []
        for owner, queue in queues.items():
            depth = queue.metric_approximate_number_of_messages_visible(statistic="Maximum", period=MINUTE)
            depths.append(depth.with_(label=owner))
            ages.append(
                queue.metric_approximate_age_of_oldest_message(
                    statistic="Maximum", period=FIVE_MINUTES, label=owner
                )
            )
            alarms.append(
                self._alarm(
                    f"{owner}DeadLetters",
                    depth,
                    threshold=1,
                    missing=EVENT,
                    summary=f"Messages wait in the {owner} dead-letter queue (kept 14 days).",
                )
            )
        graphs = [Graph("Messages waiting", depths), Graph("Oldest message (s)", ages)]
        return Section("Dead-letter queues", graphs, alarms)

    def _watch_ops(self, workflows: Mapping[str, sfn.IStateMachine]) -> Section:
        """Runs of the ops workflows (docs/operations.md) that failed or timed out: nobody watches the scheduled
        tombstone purge, and an operator's run may outlive their shell."""
        alarms = []
        started = []
        failures = []
        for operation, machine in workflows.items():
            # Ids unique on the dashboard's graph of every workflow's failures.
            failed = cloudwatch.MathExpression(
                expression=f"{operation}Failed + {operation}TimedOut",
                using_metrics={
                    f"{operation}Failed": machine.metric_failed(statistic="Sum", period=FIVE_MINUTES),
                    f"{operation}TimedOut": machine.metric_timed_out(statistic="Sum", period=FIVE_MINUTES),
                },
                label=operation,
                period=FIVE_MINUTES,
            )
            started.append(machine.metric_started(statistic="Sum", period=FIVE_MINUTES, label=operation))
            failures.append(failed)
            alarms.append(
                self._alarm(
                    "OpsRunFailed",
                    failed,
                    subject=operation,
                    threshold=1,
                    missing=EVENT,
                    summary=f"A run of the ops {operation} workflow failed or timed out: its summary "
                    f"(runs/{operation}/<run id>/summary.json in the ops bucket) says what.",
                )
            )
        graphs = [Graph("Runs started", started), Graph("Runs failed or timed out", failures)]
        return Section("Ops workflows", graphs, alarms)

    # --- one alarm ----------------------------------------------------------------------------------------------

    def _alarm(
        self,
        kind: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        missing: cloudwatch.TreatMissingData,
        summary: str,
        subject: str | None = None,
        evaluation_periods: int = 1,
        comparison: cloudwatch.ComparisonOperator = GTE,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            f"{kind}-{subject}" if subject else kind,
            alarm_name=alarm_name(self._environment, kind, subject),
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            treat_missing_data=missing,
            alarm_description=_described(kind, summary),
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms.append(alarm)
        return alarm


def _described(kind: str, summary: str) -> str:
    return f"{summary} Runbook: {RUNBOOK}#{kind.lower()}"
