"""The alarm model (tests/support/alarm_evaluation.py) against the CloudWatch User Guide's own tables and the rules it
cites: every row of both tables under every treatment of missing data, a just-created alarm on a metric that was
never published, periods that end at each minute's evaluation, and comparisons of two metrics."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.alarm_evaluation import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    TREATMENTS,
    AlarmDefinition,
    any_of,
    decide,
    evaluation_range,
    replay,
    state,
)

RETAIN = "Retain current state"
# The guide's first table ("Datapoints to Alarm and Evaluation Periods are both 3", evaluation range 5) and its
# second ("Datapoints to Alarm is only 2 while Evaluation Periods is 3"), as printed: the data points, most recent on
# the right (0 non-breaching, X breaching, - missing), then the state under MISSING, IGNORE, BREACHING, NOT BREACHING.
THREE_OF_THREE = [
    ("0 - X - X", OK, OK, OK, OK),
    ("0 - - - -", OK, OK, OK, OK),
    ("- - - - -", INSUFFICIENT_DATA, RETAIN, ALARM, OK),
    ("0 X X - X", ALARM, ALARM, ALARM, ALARM),
    ("- - X - -", ALARM, RETAIN, ALARM, OK),
]
TWO_OF_THREE = [
    ("0 - X - X", ALARM, ALARM, ALARM, ALARM),
    ("0 0 X 0 X", ALARM, ALARM, ALARM, ALARM),
    ("0 - X - -", OK, OK, ALARM, OK),
    ("- - - - 0", OK, OK, ALARM, OK),
    ("- - - X -", ALARM, RETAIN, ALARM, OK),
]
POINT = {"0": 5.0, "X": 20.0, "-": None}


def alarm(
    missing: str, *, n: int = 3, m: int | None = None, period: int = 60, **metric: Any
) -> AlarmDefinition:
    """An alarm on one metric's Maximum >= 10, unless `metric` says otherwise."""
    metric = {"statistic": "Maximum", "threshold": 10, "comparison": "GreaterThanOrEqualToThreshold"} | metric
    return AlarmDefinition.of_metric(
        period=period, evaluation_periods=n, datapoints_to_alarm=m, treat_missing_data=missing, **metric
    )


@pytest.mark.parametrize(
    ("m", "row"), [(3, row) for row in THREE_OF_THREE] + [(2, row) for row in TWO_OF_THREE]
)
def test_every_row_of_the_guides_tables_under_every_treatment_of_missing_data(
    m: int, row: tuple[str, str, str, str, str]
) -> None:
    points, *expected = row
    values = [POINT[p] for p in points.split()]
    got = [decide(alarm(missing, m=m), values, previous=RETAIN) for missing in TREATMENTS]
    assert got == expected, f"{points} ({m} of 3): {dict(zip(TREATMENTS, got, strict=True))}"


def test_the_guides_rows_come_out_of_samples_on_a_clock_as_they_do_from_points() -> None:
    """The range is the 5 periods that end at the evaluation: "- - X - -" is a breaching sample 3 periods back."""
    samples = [(120 + 30, 20.0)]  # in the period [120, 180) of an evaluation at 300
    points = evaluation_range(alarm("missing"), samples, now=300, extra_range_periods=2)
    assert points == [None, None, 20.0, None, None]
    assert state(alarm("missing"), samples, now=300) == ALARM
    assert state(alarm("notBreaching"), samples, now=300) == OK


@pytest.mark.parametrize("extra_range_periods", [1, 2, 5, 30])
def test_a_just_created_alarm_on_a_metric_never_published_is_in_alarm_at_once_when_missing_data_breaches(
    extra_range_periods: int,
) -> None:
    """Issue 32.4: PutMetricAlarm sets a new alarm to INSUFFICIENT_DATA, then evaluates it; the evaluation range
    before its creation is as missing as after, so under `breaching` the first evaluation is ALARM, and pages."""
    created_at = 86_400.0 + 17  # any time: periods end at the evaluation, not at multiples of anything
    unpublished = {"since": created_at, "until": created_at + 600, "extra_range_periods": extra_range_periods}
    for n in (1, 3, 8):
        history = replay(alarm("breaching", n=n), [], **unpublished)
        assert history.states[0] == (created_at, ALARM)
        assert history.pages(before=INSUFFICIENT_DATA) == [created_at]
    firsts = {"notBreaching": OK, "missing": INSUFFICIENT_DATA, "ignore": INSUFFICIENT_DATA}
    for missing, first in firsts.items():
        history = replay(alarm(missing), [], **unpublished)
        assert {value for _, value in history.states} == {first}, missing


def test_a_metric_reported_before_the_alarm_was_created_is_evaluated_from_before_its_creation() -> None:
    """GUIDE: "CloudWatch retrieves the most recent data points from before the alarm was created"."""
    samples = [(30.0, 20.0), (90.0, 20.0), (150.0, 20.0)]
    history = replay(alarm("missing"), samples, since=200, until=200, extra_range_periods=2)
    assert history.states == ((200, ALARM),)


def test_a_five_minute_alarm_is_evaluated_every_minute_over_periods_that_end_at_the_evaluation() -> None:
    """GUIDE: "at the end of minute 5 the alarm evaluates based on data from minutes 1 to 5. Then at the end of minute
    6, the alarm is evaluated based on the data from minutes 2 to 6"."""
    five = alarm("notBreaching", n=1, period=300)
    samples = [(30.0, 20.0), (330.0, 5.0)]  # in minute 1, and in minute 6
    assert state(five, samples, now=300) == ALARM
    assert state(five, samples, now=360) == OK


def test_sample_count_of_a_period_without_samples_is_missing_not_zero() -> None:
    count = {"statistic": "SampleCount", "threshold": 1, "comparison": "LessThanThreshold"}
    assert state(alarm("breaching", **count), [(30, 9.0), (90, 9.0), (150, 9.0)], now=180) == OK
    assert state(alarm("notBreaching", **count), [], now=600) == OK  # a count of zero would breach
    assert state(alarm("breaching", **count), [], now=600) == ALARM


def comparison() -> AlarmDefinition:
    stat = {"Metric": {}, "Period": 60, "Stat": "SampleCount"}
    return AlarmDefinition.from_template(
        {
            "EvaluationPeriods": 2,
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "notBreaching",
            "Metrics": [
                *({"Id": name, "MetricStat": stat, "ReturnData": False} for name in ("due", "seen")),
                {"Id": "expr", "Expression": "due > seen"},
            ],
        }
    )


def test_a_comparison_of_two_metrics_treats_the_one_without_a_value_as_zero() -> None:
    """MATH: "only one of the time series has a value for a particular time stamp, the function treats the missing
    value in the other time series as 0"."""

    def at_180(operands: dict[str, list[tuple[float, float]]]) -> list[float | None]:
        return evaluation_range(comparison(), operands, now=180, extra_range_periods=1)

    due, seen = [(10.0, 1.0), (70.0, 1.0), (130.0, 1.0)], [(75.0, 2.0)]
    assert at_180({"due": due, "seen": []}) == [1.0, 1.0, 1.0]
    assert at_180({"due": due, "seen": seen}) == [1.0, 0.0, 1.0]
    assert at_180({"due": [], "seen": seen}) == [None, 0.0, None]


def test_a_period_in_which_neither_metric_has_a_value_is_left_open_by_the_guide_and_swept_by_the_model() -> (
    None
):
    watched = comparison()
    assert evaluation_range(watched, {}, now=120, extra_range_periods=1) == [None, None, None]
    assert evaluation_range(watched, {}, now=120, extra_range_periods=1, no_operand="zero") == [0.0, 0.0, 0.0]


def test_an_alarm_template_with_a_math_expression_reads_its_metrics_and_expression() -> None:
    watched = comparison()
    read = (watched.period, watched.expression, dict(watched.statistics))
    assert read == (60, "due > seen", {"due": "SampleCount", "seen": "SampleCount"})


def test_an_evaluation_range_no_longer_than_the_evaluation_periods_is_refused() -> None:
    """GUIDE: CloudWatch "attempts to retrieve a higher number of data points than the number specified as
    Evaluation Periods"."""
    with pytest.raises(ValueError, match="higher number"):
        state(alarm("breaching"), [], now=600, extra_range_periods=0)


def test_an_updated_alarm_keeps_its_state_and_a_composite_follows_its_childrens_states() -> None:
    samples = [(t + 30.0, 5.0) for t in range(0, 600, 60)]
    kept = replay(alarm("ignore"), [], since=0, until=120, extra_range_periods=2, created=False, previous=OK)
    assert {value for _, value in kept.states} == {OK}
    quiet = replay(alarm("notBreaching"), samples, since=0, until=600, extra_range_periods=2)
    loud = replay(alarm("breaching"), [], since=300, until=600, extra_range_periods=2)
    composite = any_of([quiet, loud], since=0, until=600)
    assert composite.pages(before=OK) == [300]


def test_an_unknown_treatment_or_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="treat missing data"):
        alarm("sometimes")
    with pytest.raises(ValueError, match="only a comparison"):
        AlarmDefinition(
            60, 1, 1, 1, "GreaterThanOrEqualToThreshold", "missing", {"a": "Sum", "b": "Sum"}, "a + b"
        )
