"""Every function of the stateless stack: reserved concurrency per environment, environment variables encrypted
with the data key, tracing, runtime, encrypted logs, and the account quota each environment needs (as
docs/environments.md states it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.config import EnvironmentConfig
from infra.environments import environments
from tests.infra.templates_helpers import (
    data_key_arn,
    framework_function,
    handler_function,
    resolve,
    subnet_refs,
    sync_function,
    worker_function,
)
from tests.support.template import Template

FUNCTION = "AWS::Lambda::Function"
ENVIRONMENTS_DOC = Path(__file__).resolve().parents[2] / "docs" / "environments.md"
FUNCTION_NAMES = ("stream sync", "index bootstrap", "bootstrap provider", "ops worker")


def functions(stateless: Template) -> dict[str, dict[str, Any]]:
    """The stateless stack's functions by the name config gives their reservation; there are no others (a fifth
    would be a hidden CDK provider, log retention or auto-delete, that nobody hardened)."""
    found = {
        "stream sync": sync_function(stateless)[1],
        "index bootstrap": handler_function(stateless)[1],
        "bootstrap provider": framework_function(stateless)[1],
        "ops worker": worker_function(stateless)[1],
    }
    assert len(stateless.find_resources(FUNCTION)) == len(found)
    return found


def test_reserved_concurrency_follows_config(stateless: Template, config: EnvironmentConfig) -> None:
    reserved = {
        name: resource["Properties"].get("ReservedConcurrentExecutions")
        for name, resource in functions(stateless).items()
    }
    expected = config.concurrency_reservations()
    assert reserved == {name: expected.get(name) for name in FUNCTION_NAMES}


def test_an_environment_reserves_concurrency_for_every_function_or_for_none(
    config: EnvironmentConfig,
) -> None:
    reserved = config.concurrency_reservations()
    if config.reserve_concurrency:
        assert set(reserved) == set(FUNCTION_NAMES)
        assert config.required_concurrency_quota() == 100 + sum(reserved.values())
    else:
        assert reserved == {} and config.required_concurrency_quota() == 10


def test_every_function_encrypts_its_environment_with_the_data_key(
    stateful: Template, stateless: Template
) -> None:
    for name, resource in functions(stateless).items():
        key = resolve(stateful, stateless, resource["Properties"].get("KmsKeyArn"))
        assert key == data_key_arn(stateful), name


def test_every_function_runs_in_every_isolated_subnet_with_a_group_of_its_stack(
    stateful: Template, stateless: Template
) -> None:
    subnets = sorted(map(json.dumps, subnet_refs(stateful)))
    for name, resource in functions(stateless).items():
        vpc_config = resolve(stateful, stateless, resource["Properties"]["VpcConfig"])
        assert sorted(map(json.dumps, vpc_config["SubnetIds"])) == subnets, name
        ((group,),) = [vpc_config["SecurityGroupIds"]]
        assert group["Fn::GetAtt"][0] in stateless.find_resources("AWS::EC2::SecurityGroup"), name


def test_every_function_is_traced(stateless: Template) -> None:
    for name, resource in functions(stateless).items():
        assert resource["Properties"]["TracingConfig"] == {"Mode": "Active"}, name


def test_every_python_function_runs_python_3_14_on_arm64(stateless: Template) -> None:
    python = {name: r for name, r in functions(stateless).items() if name != "bootstrap provider"}
    for name, resource in python.items():
        properties = resource["Properties"]
        assert (properties["Runtime"], properties["Architectures"]) == ("python3.14", ["arm64"]), name


def test_every_function_logs_to_an_encrypted_group_with_configured_retention(
    stateful: Template, stateless: Template, config: EnvironmentConfig
) -> None:
    groups = stateless.find_resources("AWS::Logs::LogGroup")
    for name, resource in functions(stateless).items():
        group = groups[resource["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]]
        assert resolve(stateful, stateless, group["Properties"]) == {
            "KmsKeyId": data_key_arn(stateful),
            "RetentionInDays": config.log_retention_days,
        }, name


@pytest.mark.parametrize("name", sorted(environments()))
def test_the_docs_state_the_concurrency_quota_each_environment_needs(name: str) -> None:
    config = environments()[name]
    row = re.search(
        r"^\| Lambda concurrency quota needed \|(.*)$", ENVIRONMENTS_DOC.read_text(), re.MULTILINE
    )
    assert row, "docs/environments.md has no 'Lambda concurrency quota needed' row in the environments table"
    cells = [cell.strip() for cell in row.group(1).strip().strip("|").split("|")]
    assert cells[list(environments()).index(name)].startswith(f"{config.required_concurrency_quota()}")
