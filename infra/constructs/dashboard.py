"""One CloudWatch dashboard per environment: every alarm's state on top, then each part's graphs and alarms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

GRID_WIDTH = 24  # CloudWatch dashboards are 24 units wide
GRAPH = (8, 6)
ALARM = (6, 5)


@dataclass(frozen=True)
class Graph:
    """A graph of the metric objects the alarms watch (so names come from the resources, never typed twice)."""

    title: str
    left: Sequence[cloudwatch.IMetric]
    right: Sequence[cloudwatch.IMetric] = ()
    threshold: float | None = None  # drawn as the alarm's line
    stacked: bool = False

    def widget(self) -> cloudwatch.GraphWidget:
        annotations = None
        if self.threshold is not None:
            annotations = [cloudwatch.HorizontalAnnotation(value=self.threshold, label="alarm")]
        return cloudwatch.GraphWidget(
            title=self.title,
            left=list(self.left),
            right=list(self.right) or None,
            left_annotations=annotations,
            stacked=self.stacked,
            width=GRAPH[0],
            height=GRAPH[1],
        )


@dataclass(frozen=True)
class Section:
    """One part of the platform: its graphs, then a widget for each of its alarms."""

    title: str
    graphs: Sequence[Graph]
    alarms: Sequence[cloudwatch.Alarm]


class OperationsDashboard(Construct):
    """The alarms' states first, then per section its graphs and a widget per alarm, in the sections' order."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        overview: cloudwatch.IAlarm,
        sections: Sequence[Section],
    ) -> None:
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(
            self, "Resource", dashboard_name=name, default_interval=Duration.hours(3)
        )
        every_alarm = [alarm for section in sections for alarm in section.alarms]
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Alarms: PlatformDegraded is in ALARM while any other is",
                alarms=[overview, *every_alarm],
                width=GRID_WIDTH,
                height=6,
            )
        )
        for section in sections:
            self.dashboard.add_widgets(
                cloudwatch.TextWidget(
                    markdown=f"## {section.title}\nEach alarm's section in docs/runbook.md (platform repository) says "
                    "what it means, what to look at first and what to run.",
                    width=GRID_WIDTH,
                    height=2,
                )
            )
            graphs = [graph.widget() for graph in section.graphs]
            alarms = [
                cloudwatch.AlarmWidget(alarm=alarm, title=alarm.node.id, width=ALARM[0], height=ALARM[1])
                for alarm in section.alarms
            ]
            # A row wraps at the dashboard's width.
            self.dashboard.add_widgets(*graphs)
            self.dashboard.add_widgets(*alarms)
