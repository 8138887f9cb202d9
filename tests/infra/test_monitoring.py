"""Alarms notify the stateful stack's alarm topic; the sync's own script-error metric is watched."""

from __future__ import annotations

from aws_cdk.assertions import Template

from tests.infra.test_stream_sync import resolve, sync_function

ALARM = "AWS::CloudWatch::Alarm"


def alarm_topic(stateful: Template) -> dict[str, str]:
    (topic_id,) = stateful.find_resources("AWS::SNS::Topic")
    return {"Ref": topic_id}


def test_every_alarm_notifies_the_alarm_topic(stateful: Template, stateless: Template) -> None:
    alarms = resolve(stateful, stateless, stateless.find_resources(ALARM))
    assert alarms
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [alarm_topic(stateful)]


def test_script_errors_alarm_watches_the_metric_the_sync_emits(stateless: Template) -> None:
    _, function = sync_function(stateless)
    namespace = function["Properties"]["Environment"]["Variables"]["METRICS_NAMESPACE"]
    (alarm,) = stateless.find_resources(ALARM, {"Properties": {"MetricName": "ScriptErrors"}}).values()
    properties = alarm["Properties"]
    assert (properties["Namespace"], properties["Statistic"], properties["Period"]) == (namespace, "Sum", 300)
    assert (properties["Threshold"], properties["ComparisonOperator"]) == (
        1,
        "GreaterThanOrEqualToThreshold",
    )
    assert properties["TreatMissingData"] == "notBreaching"
