"""The worker's clients (lambdas/ops/clients.py) are made once per execution environment and reused by its later
invocations, and made anew when the role's credentials or an endpoint override in the environment change."""

from __future__ import annotations

import boto3
import pytest

from ops import clients

VPC_ENDPOINT = "https://vpce-1.streams.dynamodb.ca-central-1.vpce.amazonaws.com"


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFIRST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def test_an_environment_reuses_its_clients_and_makes_new_ones_for_new_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # a session that reads these credentials
    first = clients.client("s3", "ca-central-1")
    assert clients.client("s3", "ca-central-1") is first
    assert clients.client("s3", "eu-west-1") is not first
    assert clients.client("sqs", "ca-central-1") is not first
    table = clients.resource("dynamodb", "ca-central-1")
    assert clients.resource("dynamodb", "ca-central-1") is table
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSECOND")  # the role's credentials renewed
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    second = clients.client("s3", "ca-central-1")
    assert second is not first
    assert second._request_signer._credentials.access_key == "AKIDSECOND"


def test_a_streams_endpoint_override_makes_a_client_of_that_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DYNAMODB_STREAMS_ENDPOINT", raising=False)
    public = clients.client("dynamodbstreams", "ca-central-1")
    monkeypatch.setenv("DYNAMODB_STREAMS_ENDPOINT", VPC_ENDPOINT)
    private = clients.client("dynamodbstreams", "ca-central-1")
    assert private is not public
    assert private.meta.endpoint_url == VPC_ENDPOINT


def test_the_sts_client_asks_the_regional_endpoint_the_role_is_assumed_through() -> None:
    sts = clients.client("sts", "ca-west-1")
    assert sts.meta.endpoint_url == "https://sts.ca-west-1.amazonaws.com"
    assert clients.client("sts", "ca-west-1") is sts
