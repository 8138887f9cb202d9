"""A model of how CloudWatch evaluates a metric alarm, for tests that replay a timeline against alarms as synthesized,
on an injected clock: nothing here reads the real time.

Every rule is the documentation's, quoted where it is applied (``GUIDE``: the CloudWatch User Guide, *Using Amazon
CloudWatch alarms*, sections "Evaluating an alarm", "Alarm actions", "Configuring how CloudWatch alarms treat missing
data" with its two tables, and "Avoiding premature transitions to alarm state"; ``MATH``: the guide's *Use metric
math*, "Comparison and logical operators"; ``API``: the CloudWatch API Reference, ``PutMetricAlarm`` and
``PutCompositeAlarm``, as botocore's service model carries it). ``test_alarm_evaluation.py`` replays both of the
guide's tables, row by row and for each treatment of missing data, against this model.

What the documentation leaves open is a parameter, never a choice made here, so a test can sweep it and a design
can be shown not to depend on it:

- ``extra_range_periods``: how many periods the evaluation range holds beyond the evaluation periods. GUIDE: "the
  exact number of data points it attempts to retrieve depends on the length of the alarm period and whether it is
  based on a metric with standard resolution or high resolution"; it is "a higher number of data points than the
  number specified as Evaluation Periods", so at least one more (the tables use 5 for 3).
- ``no_operand``: what a comparison of two metrics gives for a period in which neither has a value. MATH says only
  what happens when "only one of the time series has a value for a particular time stamp".
- Where a premature transition's breaching point must lie (GUIDE says "during the **Evaluation Periods** number of
  data points" once and "during the evaluation range" once): the model takes the first; the heartbeat design does
  not use a treatment of missing data that this rule applies to.
"""

from __future__ import annotations

import math
import operator
import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ALARM = "ALARM"
OK = "OK"
INSUFFICIENT_DATA = "INSUFFICIENT_DATA"
MINUTE = 60

COMPARISONS = {
    "GreaterThanOrEqualToThreshold": operator.ge,
    "GreaterThanThreshold": operator.gt,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
OPERATORS = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}
STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {
    "Maximum": max,
    "Minimum": min,
    "Sum": sum,
    "SampleCount": len,
    "Average": lambda values: sum(values) / len(values),
}
TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")
ONE_METRIC = "m"
COMPARISON_EXPRESSION = re.compile(r"^\s*(\w+)\s*(>=|<=|==|!=|>|<)\s*(\w+)\s*$")

Samples = Mapping[str, Iterable[tuple[float, float]]] | Iterable[tuple[float, float]]
NoOperand = Literal["missing", "zero"]


@dataclass(frozen=True)
class AlarmDefinition:
    """The evaluation settings of one metric alarm: one metric (``expression`` None, its statistic under
    ``ONE_METRIC``) or a comparison of two metrics (``expression`` "<id> <operator> <id>", a statistic per id)."""

    period: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing_data: str
    statistics: Mapping[str, str]
    expression: str | None = None

    @classmethod
    def of_metric(
        cls,
        *,
        period: int,
        evaluation_periods: int,
        statistic: str,
        threshold: float,
        comparison: str,
        treat_missing_data: str,
        datapoints_to_alarm: int | None = None,
    ) -> AlarmDefinition:
        return cls(
            period,
            evaluation_periods,
            datapoints_to_alarm or evaluation_periods,
            threshold,
            comparison,
            treat_missing_data,
            {ONE_METRIC: statistic},
        )

    @classmethod
    def from_template(cls, properties: Mapping[str, Any]) -> AlarmDefinition:
        """From the properties of an ``AWS::CloudWatch::Alarm`` as synthesized. Defaults, API: ``DatapointsToAlarm``
        absent is ``EvaluationPeriods`` (an alarm "that requires that a number of consecutive data points be
        breaching"); ``TreatMissingData`` "If TreatMissingData is omitted, the default behavior of missing is used"."""
        evaluation_periods = int(properties["EvaluationPeriods"])
        common = {
            "evaluation_periods": evaluation_periods,
            "datapoints_to_alarm": int(properties.get("DatapointsToAlarm", evaluation_periods)),
            "threshold": float(properties["Threshold"]),
            "comparison": str(properties["ComparisonOperator"]),
            "treat_missing_data": str(properties.get("TreatMissingData", "missing")),
        }
        if "Metrics" not in properties:
            return cls(
                period=int(properties["Period"]),
                statistics={ONE_METRIC: str(properties["Statistic"])},
                **common,  # type: ignore[arg-type]
            )
        queries = list(properties["Metrics"])
        (watched,) = [q for q in queries if q.get("ReturnData", True) and "Expression" in q]
        stats = {q["Id"]: q["MetricStat"] for q in queries if "MetricStat" in q}
        # GUIDE: "Each metric must be using the same period"
        (period,) = {int(stat["Period"]) for stat in stats.values()}
        return cls(
            period=period,
            statistics={name: str(stat["Stat"]) for name, stat in stats.items()},
            expression=str(watched["Expression"]),
            **common,  # type: ignore[arg-type]
        )

    def __post_init__(self) -> None:
        if self.treat_missing_data not in TREATMENTS:
            raise ValueError(f"treat missing data {self.treat_missing_data!r} is not one of {TREATMENTS}")
        unknown = {s for s in self.statistics.values() if s not in STATISTICS}
        if unknown or self.comparison not in COMPARISONS:
            raise ValueError(f"{unknown or ''} {self.comparison} is not modelled")
        if self.expression is not None:
            match = COMPARISON_EXPRESSION.match(self.expression)
            if not match or {match[1], match[3]} != set(self.statistics):
                raise ValueError(f"only a comparison of the two metrics is modelled, not {self.expression!r}")
        elif set(self.statistics) != {ONE_METRIC}:
            raise ValueError("a metric alarm without an expression reads one metric")
        if self.period < MINUTE:
            raise ValueError("high-resolution alarms (periods under a minute) are not modelled")


class Series(dict[str, tuple[list[float], list[float]]]):
    """Each metric's samples as (times, values), sorted by time: a period's values are a slice found by bisection."""


def series_of(samples: Samples) -> Series:
    """The samples of each metric id (a bare iterable is the one metric's), sorted by time."""
    by_id = {ONE_METRIC: samples} if not isinstance(samples, Mapping) else samples
    out = Series()
    for name, points in by_id.items():
        ordered = sorted(points, key=lambda point: point[0])
        out[name] = ([at for at, _ in ordered], [value for _, value in ordered])
    return out


def datapoint(
    alarm: AlarmDefinition, series: Series, start: float, end: float, no_operand: NoOperand = "missing"
) -> float | None:
    """The alarm's data point over ``[start, end)``: the statistic of its metric, or the value of its expression."""
    values = {}
    for name, stat in alarm.statistics.items():
        times, points = series.get(name, ((), ()))
        period = points[bisect_left(times, start) : bisect_left(times, end)]
        # A period with no samples has no data point (for SampleCount too: not a zero), GUIDE: "each specific data
        # point reported to CloudWatch falls under one of three categories: Not breaching ... Breaching ... Missing".
        values[name] = float(STATISTICS[stat](period)) if period else None
    if alarm.expression is None:
        return values[ONE_METRIC]
    match = COMPARISON_EXPRESSION.match(alarm.expression)
    assert match
    left, right = values[match[1]], values[match[3]]
    if left is None and right is None:
        return None if no_operand == "missing" else 0.0
    # MATH: "When comparison operators are used between two time series, and only one of the time series has a value
    # for a particular time stamp, the function treats the missing value in the other time series as 0." and
    # "the operators return a time series where each data point is either 0 (false) or 1 (true)".
    return 1.0 if OPERATORS[match[2]](left or 0.0, right or 0.0) else 0.0


def evaluation_range(
    alarm: AlarmDefinition,
    samples: Samples | Series,
    *,
    now: float,
    extra_range_periods: int,
    no_operand: NoOperand = "missing",
) -> list[float | None]:
    """The data points CloudWatch retrieves when it evaluates the alarm at ``now``, oldest first.

    GUIDE: "For any period of one minute or longer, an alarm is evaluated every minute and the evaluation is based on
    the window of time defined by the Period and Evaluation Periods. For example, if the Period is 5 minutes (300
    seconds) and Evaluation Periods is 1, then at the end of minute 5 the alarm evaluates based on data from minutes
    1 to 5. Then at the end of minute 6, the alarm is evaluated based on the data from minutes 2 to 6." So the
    periods end at the evaluation, whenever the alarm was created. "Whenever an alarm evaluates whether to change
    state, CloudWatch attempts to retrieve a higher number of data points than the number specified as Evaluation
    Periods ... The time frame of the data points that it attempts to retrieve is the evaluation range." Nothing
    limits the range to the alarm's lifetime: "If data points are missing soon after you create an alarm, and the
    metric was being reported to CloudWatch before you created the alarm, CloudWatch retrieves the most recent data
    points from before the alarm was created when evaluating the alarm." Periods before the metric existed are
    missing data points like any other."""
    if extra_range_periods < 1:
        raise ValueError(
            "the evaluation range holds 'a higher number of data points' than the evaluation periods"
        )
    series = samples if isinstance(samples, Series) else series_of(samples)
    length = alarm.evaluation_periods + extra_range_periods
    return [
        datapoint(alarm, series, now - k * alarm.period, now - (k - 1) * alarm.period, no_operand)
        for k in range(length, 0, -1)
    ]


def breaches(alarm: AlarmDefinition, value: float) -> bool:
    # API ComparisonOperator: "The specified statistic value is used as the first operand."
    return bool(COMPARISONS[alarm.comparison](value, alarm.threshold))


def decide(alarm: AlarmDefinition, points: Sequence[float | None], previous: str) -> str:
    """The state the alarm takes from its evaluation range (``points``, oldest first) and its ``previous`` state."""
    n, m = alarm.evaluation_periods, alarm.datapoints_to_alarm
    # (age, breaching) of each real data point
    real = [(len(points) - i, breaches(alarm, v)) for i, v in enumerate(points) if v is not None]
    if len(real) >= n:
        # GUIDE: "If no data points in the evaluation range are missing, CloudWatch evaluates the alarm based on the
        # most recent data points collected. The number of data points evaluated is equal to the Evaluation Periods
        # for the alarm." / "If some data points in the evaluation range are missing, but the total number of
        # existing data points that were successfully retrieved from the evaluation range is equal to or more than
        # the alarm's Evaluation Periods, CloudWatch evaluates the alarm state based on the most recent real data
        # points that were successfully retrieved ... the value you set for how to treat missing data is not
        # needed and is ignored."
        evaluated = [breaching for _, breaching in real[-n:]]
        # GUIDE ("Evaluating an alarm"): "Datapoints to Alarm is the number of data points within the Evaluation
        # Periods that must be breaching to cause the alarm to go to the ALARM state."
        return ALARM if sum(evaluated) >= m else OK
    treatment = alarm.treat_missing_data
    if treatment in ("breaching", "notBreaching"):
        # GUIDE: "If some data points in the evaluation range are missing, and the number of actual data points that
        # were retrieved is lower than the alarm's number of Evaluation Periods, CloudWatch fills in the missing data
        # points with the result you specified for how to treat missing data, and then evaluates the alarm. However,
        # all real data points in the evaluation range are included in the evaluation. CloudWatch uses missing data
        # points only as few times as possible." With "breaching – Missing data points are treated as "bad" and
        # breaching the threshold" and "notBreaching – Missing data points are treated as "good" and within the
        # threshold". Table row "- - - - -": BREACHING ALARM, NOT BREACHING OK.
        evaluated = [breaching for _, breaching in real] + [treatment == "breaching"] * (n - len(real))
        return ALARM if sum(evaluated) >= m else OK
    if not real:
        # GUIDE: "missing – If all data points in the alarm evaluation range are missing, the alarm transitions to
        # INSUFFICIENT_DATA." and "ignore – The current alarm state is maintained" (table: "Retain current state").
        return INSUFFICIENT_DATA if treatment == "missing" else previous
    oldest_age, _ = real[0]
    if all(breaching for _, breaching in real) and m <= oldest_age <= n:
        # GUIDE ("Avoiding premature transitions to alarm state"): "alarms are designed to always go into ALARM state
        # when the oldest available breaching datapoint during the Evaluation Periods number of data points is at
        # least as old as the value of Datapoints to Alarm, and all other more recent data points are breaching or
        # missing. In this case, the alarm goes to ALARM state even if the total number of datapoints available is
        # lower than M". The tables' rows 5: MISSING ALARM, IGNORE "Retain current state".
        return ALARM if treatment == "missing" else previous
    # Fewer real points than the evaluation periods, nothing filled: the tables' rows "0 - - - -", "0 - X - -" and
    # "- - - - 0" are OK under MISSING and IGNORE.
    return ALARM if sum(breaching for _, breaching in real) >= m else OK


def state(
    alarm: AlarmDefinition,
    samples: Samples | Series,
    *,
    now: float,
    extra_range_periods: int = 2,
    previous: str = INSUFFICIENT_DATA,
    no_operand: NoOperand = "missing",
) -> str:
    """The alarm's state after one evaluation at ``now`` (2 extra periods: the guide's tables' range of 5 for 3)."""
    points = evaluation_range(
        alarm, samples, now=now, extra_range_periods=extra_range_periods, no_operand=no_operand
    )
    return decide(alarm, points, previous)


@dataclass(frozen=True)
class History:
    """The states an alarm took, one per evaluation: ``(time, state)``, oldest first."""

    states: tuple[tuple[float, str], ...]

    def at(self, time: float) -> str:
        current = INSUFFICIENT_DATA
        for at, value in self.states:
            if at > time:
                break
            current = value
        return current

    def pages(self, before: str) -> list[float]:
        """When the alarm entered ``ALARM``, its state before its first evaluation being ``before``. GUIDE ("Alarm
        actions"): "the actions happen only on state transitions, and are not performed again if the condition
        persists for hours or days"; API PutMetricAlarm: "Any actions associated with the new state are then
        executed"."""
        entered = []
        for at, value in self.states:
            if value == ALARM and before != ALARM:
                entered.append(at)
            before = value
        return entered


def replay(
    alarm: AlarmDefinition,
    samples: Samples,
    *,
    since: float,
    until: float,
    extra_range_periods: int,
    created: bool = True,
    previous: str = OK,
    no_operand: NoOperand = "missing",
) -> History:
    """The alarm's evaluations from ``since`` to ``until``, one a minute (GUIDE: "an alarm is evaluated every
    minute"). ``created``: the alarm is created at ``since`` (API PutMetricAlarm: "When this operation creates an
    alarm, the alarm state is immediately set to INSUFFICIENT_DATA. ... The alarm is then evaluated and its state is
    set appropriately."); otherwise it existed in state ``previous`` (API: "When you update an existing alarm, its
    state is left unchanged")."""
    current = INSUFFICIENT_DATA if created else previous
    series = series_of(samples)  # once: each minute's evaluation bisects it
    options = {"extra_range_periods": extra_range_periods, "no_operand": no_operand}
    states = []
    for now in _minutes(since, until):
        current = state(alarm, series, now=now, previous=current, **options)
        states.append((now, current))
    return History(tuple(states))


def any_of(children: Sequence[History], *, since: float, until: float) -> History:
    """A composite alarm whose rule is ``ALARM(a) OR ALARM(b) OR ...``, evaluated at each minute. API
    PutCompositeAlarm: "you specify a rule expression for the alarm that takes into account the alarm states of other
    alarms" and "The composite alarm goes into ALARM state only if all conditions of the rule are met"; "For a
    composite alarm, this initial time after creation is the only time that the alarm can be in INSUFFICIENT_DATA
    state." (It reads the children's states: whether their own actions are enabled plays no part.)"""
    minutes = _minutes(since, until)
    return History(
        tuple((now, ALARM if any(c.at(now) == ALARM for c in children) else OK) for now in minutes)
    )


def _minutes(since: float, until: float) -> list[float]:
    """Each minute from ``since`` to ``until``, both included: when an alarm is evaluated."""
    return [since + minute * MINUTE for minute in range(math.floor((until - since) / MINUTE) + 1)]
