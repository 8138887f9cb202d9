"""A small model of how CloudWatch evaluates a metric alarm, for tests that replay a timeline against an alarm as
synthesized (its ``Period``, ``EvaluationPeriods``, ``DatapointsToAlarm``, ``Statistic``, ``Threshold``,
``ComparisonOperator`` and ``TreatMissingData``), on an injected clock: nothing here reads the real time.

The rules it follows, from the CloudWatch User Guide:

- *Alarm evaluation* ("Evaluating an alarm"): **Period** is the length of time over which the metric is aggregated
  into one data point; **Evaluation Periods** is the number of the most recent periods, or data points, to evaluate;
  **Datapoints to Alarm** is how many of those data points must be breaching for the alarm to go to ``ALARM``
  (``DatapointsToAlarm`` absent: equal to ``EvaluationPeriods``). A data point exists for a period only if the
  metric was published in it: a statistic over no samples (``SampleCount`` included) is a missing data point, never
  zero.
- *Configuring how CloudWatch alarms treat missing data*: ``breaching`` fills a missing data point as breaching,
  ``notBreaching`` as within the threshold, ``missing`` leaves it out (all of them missing: ``INSUFFICIENT_DATA``).
  CloudWatch retrieves the data points of an **evaluation range** longer than the evaluation periods and then:
  (1) if at least ``EvaluationPeriods`` real data points are in the range, it evaluates the most recent real ones and
  the treatment of missing data is not used; (2) if fewer, it evaluates every real data point of the range and fills
  the rest with the treatment of missing data, using missing data points "as few times as possible".
- *Alarm states*: ``INSUFFICIENT_DATA`` means "the alarm has just started, the metric is not available, or not
  enough data is available".

What the guide does not fix is modelled explicitly, as a parameter or a stated assumption: the evaluation range's
length beyond the evaluation periods (``extra_range_periods``: the guide says only that it is longer), periods
aligned to multiples of the period from the timeline's zero, and a new alarm that evaluates only the periods since
it was created (before its creation it has no state: it starts in ``INSUFFICIENT_DATA``). ``ignore`` is not
modelled (it keeps the previous state, a history this model does not carry): it raises.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ALARM = "ALARM"
OK = "OK"
INSUFFICIENT_DATA = "INSUFFICIENT_DATA"

COMPARISONS = {
    "GreaterThanOrEqualToThreshold": lambda value, threshold: value >= threshold,
    "GreaterThanThreshold": lambda value, threshold: value > threshold,
    "LessThanThreshold": lambda value, threshold: value < threshold,
    "LessThanOrEqualToThreshold": lambda value, threshold: value <= threshold,
}
STATISTICS = {
    "Maximum": max,
    "Minimum": min,
    "Sum": sum,
    "SampleCount": len,
    "Average": lambda values: sum(values) / len(values),
}


@dataclass(frozen=True)
class AlarmDefinition:
    """The evaluation settings of one metric alarm (one metric, no metric math)."""

    period: int
    evaluation_periods: int
    datapoints_to_alarm: int
    statistic: str
    threshold: float
    comparison: str
    treat_missing_data: str

    @classmethod
    def from_template(cls, properties: Mapping[str, Any]) -> AlarmDefinition:
        """From the properties of an ``AWS::CloudWatch::Alarm`` as synthesized (CloudFormation's defaults: datapoints
        to alarm = evaluation periods, missing data ``missing``)."""
        evaluation_periods = int(properties["EvaluationPeriods"])
        return cls(
            period=int(properties["Period"]),
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=int(properties.get("DatapointsToAlarm", evaluation_periods)),
            statistic=str(properties["Statistic"]),
            threshold=float(properties["Threshold"]),
            comparison=str(properties["ComparisonOperator"]),
            treat_missing_data=str(properties.get("TreatMissingData", "missing")),
        )

    def __post_init__(self) -> None:
        if self.treat_missing_data not in ("breaching", "notBreaching", "missing"):
            raise ValueError(f"treat missing data {self.treat_missing_data!r} is not modelled")
        if self.statistic not in STATISTICS or self.comparison not in COMPARISONS:
            raise ValueError(f"{self.statistic} / {self.comparison} is not modelled")


def datapoints(
    alarm: AlarmDefinition, samples: Iterable[tuple[float, float]], first: int, last: int
) -> list[float | None]:
    """The data point of each period ``first``..``last`` (period n covers [n × period, (n + 1) × period)) from the
    samples (timestamp in seconds, value): the statistic over the period's samples, ``None`` for a period without."""
    buckets: dict[int, list[float]] = {}
    for at, value in samples:
        buckets.setdefault(math.floor(at / alarm.period), []).append(value)
    return [STATISTICS[alarm.statistic](buckets[n]) if n in buckets else None for n in range(first, last + 1)]


def state(
    alarm: AlarmDefinition,
    samples: Iterable[tuple[float, float]],
    *,
    now: float,
    created_at: float = 0.0,
    extra_range_periods: int = 0,
) -> str:
    """The alarm's state when evaluated at ``now``, over the periods complete by then."""
    last = math.floor(now / alarm.period) - 1  # the most recent complete period
    first_since_creation = math.ceil(created_at / alarm.period)
    first = max(first_since_creation, last - (alarm.evaluation_periods + extra_range_periods) + 1)
    if last < first:
        return INSUFFICIENT_DATA
    in_range = datapoints(alarm, samples, first, last)
    real = [value for value in in_range if value is not None]
    if len(real) >= alarm.evaluation_periods:
        evaluated = [breaches(alarm, value) for value in real[-alarm.evaluation_periods :]]
    else:
        if alarm.treat_missing_data == "missing" and not real:
            return INSUFFICIENT_DATA
        filled = min(alarm.evaluation_periods - len(real), len(in_range) - len(real))
        fill = alarm.treat_missing_data == "breaching"
        evaluated = [breaches(alarm, value) for value in real]
        if alarm.treat_missing_data != "missing":
            evaluated += [fill] * filled
    return ALARM if sum(evaluated) >= alarm.datapoints_to_alarm else OK


def breaches(alarm: AlarmDefinition, value: float) -> bool:
    return bool(COMPARISONS[alarm.comparison](value, alarm.threshold))
