"""Alarms that page: stream lag, dead-lettered records, function errors and throttles."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

ITERATOR_AGE_ALARM = Duration.minutes(5)


class Monitoring(Construct):
    """Every alarm has its metric's dimensions (so it evaluates) and an action on the stateful stack's encrypted
    alarm topic (so it reaches someone); subscribe the on-call endpoint to its ``AlarmTopicArn`` output."""

    def __init__(self, scope: Construct, construct_id: str, *, topic: sns.ITopic) -> None:
        super().__init__(scope, construct_id)
        self._action = actions.SnsAction(topic)

    def watch_stream_function(self, name: str, function: lambda_.IFunction) -> None:
        """Replication lag (iterator age), errors and throttles of a stream-triggered function."""
        self._alarm(
            f"{name}IteratorAge",
            function.metric("IteratorAge", statistic="Maximum", period=Duration.minutes(1)),
            threshold=ITERATOR_AGE_ALARM.to_milliseconds(),
            description="Stream records wait longer than 5 minutes: OpenSearch lags DynamoDB.",
        )
        self.watch_function(name, function)

    def watch_function(self, name: str, function: lambda_.IFunction) -> None:
        self._alarm(
            f"{name}Errors",
            function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
            threshold=1,
            description="The function failed (crash or timeout): its batch is being retried.",
        )
        self._alarm(
            f"{name}Throttles",
            function.metric_throttles(period=Duration.minutes(5), statistic="Sum"),
            threshold=1,
            description="Invocations were throttled by the reserved concurrency.",
        )

    def watch_script_errors(self, name: str, namespace: str) -> None:
        """The stored ordering script is missing, does not compile, or fails on a document (docs/sync.md)."""
        self._alarm(
            f"{name}ScriptErrors",
            cloudwatch.Metric(
                namespace=namespace, metric_name="ScriptErrors", statistic="Sum", period=Duration.minutes(5)
            ),
            threshold=1,
            description="The stored ordering script failed: records are held (script missing or not compiling) "
            "or dead-lettered (failing on a document). See docs/sync.md.",
        )

    def watch_dead_letter_queue(self, name: str, queue: sqs.IQueue) -> None:
        self._alarm(
            f"{name}Depth",
            queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            threshold=1,
            description="Records were dead-lettered: see docs/sync.md for the redrive procedure.",
        )

    def watch_state_machine(self, name: str, state_machine: sfn.IStateMachine) -> None:
        """A run that failed or timed out (the scheduled tombstone purge has nobody watching it)."""
        self._alarm(
            f"{name}Failed",
            cloudwatch.MathExpression(
                expression="failed + timedOut",
                using_metrics={
                    "failed": state_machine.metric_failed(period=Duration.minutes(5), statistic="Sum"),
                    "timedOut": state_machine.metric_timed_out(period=Duration.minutes(5), statistic="Sum"),
                },
                period=Duration.minutes(5),
            ),
            threshold=1,
            description="An ops workflow run failed: its summary (runs/<operation>/<run id>/summary.json in the ops "
            "bucket) says what; see docs/operations.md.",
        )

    def _alarm(
        self, construct_id: str, metric: cloudwatch.IMetric, *, threshold: float, description: str
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(self._action)
