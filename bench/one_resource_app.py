"""Baseline for the synth benchmark: a one-stack CDK app with a single resource."""

from aws_cdk import App, Stack
from aws_cdk import aws_sqs as sqs

app = App()
sqs.Queue(Stack(app, "OneResource"), "Queue")
app.synth()
