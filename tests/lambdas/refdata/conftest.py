"""moto-backed table (pk/sk, KEYS_ONLY globalId GSI) and geometry bucket for refdata integration tests."""

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.support.aws import single_table, use_fake_aws

REGION = "ca-central-1"
TABLE_NAME = "refdata"
BUCKET = "geometry-bucket"


@pytest.fixture(scope="session")
def boto_session() -> boto3.Session:
    # One session for the whole run: building clients from a fresh session costs ~50 ms each.
    return boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    use_fake_aws(monkeypatch, REGION)
    with mock_aws():
        yield


@pytest.fixture
def table(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.resource("dynamodb").create_table(**single_table(TABLE_NAME))


@pytest.fixture
def s3(aws: None, boto_session: boto3.Session) -> Any:
    return boto_session.client("s3")


@pytest.fixture
def bucket(s3: Any) -> str:
    """Name of an empty geometry bucket."""
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    return BUCKET
