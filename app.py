#!/usr/bin/env python3
"""CDK entry point: every environment's stacks. The only place that reads the process environment."""

import os

# CDK's built-in CloudFormation validation plugin repeats what cfn-lint checks in `make test` and doubles synth
# time; set CDK_VALIDATION=true to run it anyway. (Set before aws_cdk starts its jsii process.)
os.environ.setdefault("CDK_VALIDATION", "false")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App

from infra.app_builder import build_app, committed_context
from infra.validation import run


def main() -> None:
    # Under the CDK CLI the context (cdk.json + cdk.context.json + -c flags) arrives in CDK_CONTEXT_JSON;
    # a bare `python app.py` loads the committed files itself so both produce the same templates.
    app = App(context=None if "CDK_CONTEXT_JSON" in os.environ else committed_context())
    build_app(app)
    app.synth()


run(main)
