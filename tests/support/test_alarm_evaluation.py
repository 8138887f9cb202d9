"""The alarm model (tests/support/alarm_evaluation.py) against the rules it cites."""

from __future__ import annotations

import pytest

from tests.support.alarm_evaluation import ALARM, INSUFFICIENT_DATA, OK, AlarmDefinition, state


def alarm(
    missing: str, statistic: str = "Maximum", comparison: str = "GreaterThanOrEqualToThreshold"
) -> AlarmDefinition:
    return AlarmDefinition.from_template(
        {
            "Period": 60,
            "EvaluationPeriods": 3,
            "Statistic": statistic,
            "Threshold": 10,
            "ComparisonOperator": comparison,
            "TreatMissingData": missing,
        }
    )


def test_three_breaching_periods_of_three_alarm_and_two_do_not() -> None:
    samples = [(30, 5.0), (90, 20.0), (150, 20.0), (210, 20.0)]
    assert state(alarm("missing"), samples, now=240) == ALARM
    assert state(alarm("missing"), samples, now=180) == OK


def test_a_metric_never_published_is_breaching_or_not_as_configured_from_the_alarms_creation() -> None:
    assert state(alarm("breaching"), [], now=59) == INSUFFICIENT_DATA  # no complete period yet
    assert state(alarm("breaching"), [], now=120) == OK  # two of three
    assert state(alarm("breaching"), [], now=180) == ALARM
    assert state(alarm("notBreaching"), [], now=600) == OK
    assert state(alarm("missing"), [], now=600) == INSUFFICIENT_DATA


def test_enough_real_data_points_in_the_range_leave_the_missing_ones_out() -> None:
    samples = [(30, 1.0), (90, 1.0), (150, 1.0)]
    # Two periods missing since: within a range of five, three real points remain and decide.
    assert state(alarm("breaching"), samples, now=300, extra_range_periods=2) == OK
    # With no range beyond the evaluation periods, the two missing ones are filled and one real point remains.
    assert state(alarm("breaching"), samples, now=300) == OK
    assert state(alarm("breaching"), samples, now=360) == ALARM


def test_sample_count_of_a_period_without_samples_is_missing_not_zero() -> None:
    def count(missing: str) -> AlarmDefinition:
        return AlarmDefinition(60, 3, 3, "SampleCount", 1, "LessThanThreshold", missing)

    assert state(count("breaching"), [(30, 9.0), (90, 9.0), (150, 9.0)], now=180) == OK
    assert state(count("notBreaching"), [], now=600) == OK  # a count of zero would breach
    assert state(count("breaching"), [], now=600) == ALARM


def test_ignore_is_not_modelled() -> None:
    with pytest.raises(ValueError, match="ignore"):
        alarm("ignore")
