"""The fake AWS set-up (tests/support/aws.py)."""

from __future__ import annotations

import time

import boto3
import pytest
from moto import mock_aws

from tests.support.aws import use_fake_aws


def test_a_long_poll_of_an_empty_queue_ends_empty_after_its_wait_on_a_virtual_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.sqs import models

    use_fake_aws(monkeypatch, "ca-central-1")
    with mock_aws():
        sqs = boto3.client("sqs", region_name="ca-central-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]

        assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20).get("Messages", []) == []
        # the receive loop's clock moved on by the wait, virtually
        assert models.unix_time() - time.time() > 19

        sqs.send_message(QueueUrl=url, MessageBody="letter")
        (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)["Messages"]
        assert message["Body"] == "letter"
