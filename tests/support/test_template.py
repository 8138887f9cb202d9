"""The Python ``Template`` (tests/support/template.py) decides every pattern as CDK's own ``Template`` does: the same
resources found, the same assertions passing and failing, over patterns taken from a real stack and perturbed."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import assertions as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from tests.support.template import Template, mismatch


@pytest.fixture(scope="module")
def templates() -> tuple[Template, cdk.Template]:
    stack = Stack(App(), "Sample")
    queue = sqs.Queue(stack, "Queue", visibility_timeout=Duration.seconds(30), fifo=True)
    bucket = s3.Bucket(stack, "Bucket", versioned=True, enforce_ssl=True)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    queue.grant_send_messages(role)
    bucket.grant_read(role)
    stack.export_value(bucket.bucket_arn, name="BucketArn")
    native = cdk.Template.from_stack(stack)
    return Template.from_json(native.to_json()), native


def variants(value: Any) -> Iterator[Any]:
    """Patterns near ``value``: itself, each key alone, each key dropped, each leaf changed, arrays shortened,
    a boolean swapped for a number."""
    yield value
    if isinstance(value, dict):
        for key in value:
            yield {key: value[key]}
            yield {k: v for k, v in value.items() if k != key}
            for inner in variants(value[key]):
                yield {key: inner}
        yield {**value, "NotAKey": 1}
    elif isinstance(value, list):
        if value:
            yield value[:-1]
            yield [*value, value[0]]
            yield list(reversed(value))
            for index, element in enumerate(value):
                for inner in variants(element):
                    changed = copy.deepcopy(value)
                    changed[index] = inner
                    yield changed
    elif isinstance(value, bool):
        yield int(value)
        yield not value
    elif isinstance(value, int | float):
        yield value + 1
    elif isinstance(value, str):
        yield value + "x"


def outcome(template: Template | cdk.Template, assertion: str, *args: Any) -> bool:
    try:
        getattr(template, assertion)(*args)
    except Exception:  # jsii raises a RuntimeError-derived JSIIError, ours an AssertionError
        return False
    return True


def agree(templates: tuple[Template, cdk.Template], assertion: str, *args: Any) -> bool:
    """The assertion passes on ours exactly when it passes on CDK's."""
    return outcome(templates[0], assertion, *args) == outcome(templates[1], assertion, *args)


def test_find_resources_and_has_resource_properties_decide_as_cdk_does(
    templates: tuple[Template, cdk.Template],
) -> None:
    ours, native = templates
    compared = 0
    for resource in ours.to_json()["Resources"].values():
        kind = resource["Type"]
        for pattern in list(variants(resource.get("Properties", {})))[:60]:
            found = ours.find_resources(kind, {"Properties": pattern})
            assert found == native.find_resources(kind, {"Properties": pattern}), json.dumps(pattern)
            assert agree(templates, "has_resource_properties", kind, pattern), json.dumps(pattern)
            compared += 1
    assert compared > 100


def test_counts_outputs_and_copies_decide_as_cdk_does(templates: tuple[Template, cdk.Template]) -> None:
    ours, native = templates
    for kind in ("AWS::SQS::Queue", "AWS::S3::Bucket", "AWS::IAM::Policy", "AWS::Lambda::Function"):
        for count in (0, 1, 2):
            assert agree(templates, "resource_count_is", kind, count)
    for output, pattern in [("*", {"Export": {"Name": "BucketArn"}}), ("*", {"Export": {"Name": "Other"}})]:
        assert agree(templates, "has_output", output, pattern)
    edited = ours.to_json()
    edited["Resources"].clear()
    assert ours.to_json() == native.to_json()


def test_a_pattern_with_a_matcher_goes_to_cdk(templates: tuple[Template, cdk.Template]) -> None:
    ours, _ = templates
    ours.has_resource_properties("AWS::SQS::Queue", {"FifoQueue": True, "KmsMasterKeyId": cdk.Match.absent()})
    with pytest.raises(Exception, match="absent"):
        ours.has_resource_properties("AWS::SQS::Queue", {"FifoQueue": cdk.Match.absent()})


def test_a_failed_assertion_says_where_each_candidate_differs(
    templates: tuple[Template, cdk.Template],
) -> None:
    ours, _ = templates
    with pytest.raises(AssertionError, match=r"Queue[0-9A-F]{8}: /VisibilityTimeout: expected 31, found 30"):
        ours.has_resource_properties("AWS::SQS::Queue", {"VisibilityTimeout": 31})
    assert mismatch({"A": [1, 2]}, {"A": [1]}) == "/A: expected 2 elements, found 1"
