"""Synthesizes every environment once per test session and shares the templates with all infra tests.

Every fixture follows the configuration: ``env`` and ``config`` are each environment ``environments()`` returns,
``stateful``/``stateless`` its templates. Tests state contracts over them, keyed on properties (``production``,
``removal_policy``, the tables and roles configured), never on names; what the shipped configuration itself must be
is tests/infra/test_shipped_config.py's alone.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_VALIDATION", "false")


from infra import cost
from infra.config import CapacityMode, EnvironmentConfig, ProvisionedCapacity, ReadRole, RemovalPolicy
from infra.environments import environments
from infra.templates import Stack, load_assembly
from tests.support import assembly, coverage, heavy_tools
from tests.support.template import Template

# Every environment the app builds, in config order (also the parametrize ids: deterministic, so `pytest -n` works).
# Built and validated once per process: the configs are frozen, and a test that wants another edits a copy.
SHIPPED = environments()
ENVIRONMENTS = tuple(SHIPPED)
STACK_KINDS = ("Stateful", "Stateless")


@dataclass(frozen=True)
class Synthesized:
    """The session's one synth of every environment (tests/support/assembly.py): the cloud assembly, and what the
    tests need of the construct tree (each stack's construct ids, account and region, each rule pack's findings on it,
    the acknowledgments), computed once beside it."""

    outdir: Path
    facts: dict[str, Any]
    tools: heavy_tools.Background  # checkov and cfn-lint over the assembly, started as soon as it exists

    @property
    def environments(self) -> tuple[str, ...]:
        return tuple(self.facts["environments"])

    def stacks(self, env: str) -> dict[str, dict[str, Any]]:
        stacks: dict[str, dict[str, Any]] = self.facts["environments"][env]["stacks"]
        return stacks

    def stack(self, env: str, kind: str) -> dict[str, Any]:
        return self.stacks(env)[kind]

    def acknowledgments(self, env: str) -> list[tuple[str, str, str]]:
        return [tuple(found) for found in self.facts["environments"][env]["acknowledgments"]]  # type: ignore[misc]

    def template_path(self, env: str, kind: str) -> Path:
        return self.outdir / f"assembly-{env}" / self.stack(env, kind)["templateFile"]

    def template_json(self, env: str, kind: str) -> dict:
        return json.loads(self.template_path(env, kind).read_text())


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Every environment in one app, synthesized once per test session (by the controller's background synth, or
    here when nothing started one), without the nag plugins: tests/infra/test_nag.py reads each pack's findings per
    stack so a finding fails one named test instead of the whole session."""
    shared = os.environ.get(assembly.VARIABLE)
    directory = Path(shared) if shared else tmp_path_factory.mktemp("assembly")
    facts = assembly.ensure(directory)
    outdir = directory / "cdk.out"
    return Synthesized(outdir=outdir, facts=facts, tools=heavy_tools.Background(outdir))


_templates: dict[tuple[str, str], Template] = {}


def template(synthesized: Synthesized, env: str, kind: str) -> Template:
    """An assertions ``Template`` of one synthesized stack (built once, reused)."""
    if (env, kind) not in _templates:
        _templates[(env, kind)] = Template.from_json(synthesized.template_json(env, kind))
    return _templates[(env, kind)]


@pytest.fixture(params=ENVIRONMENTS)
def env(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def stateful(synthesized: Synthesized, env: str) -> Template:
    return template(synthesized, env, "Stateful")


@pytest.fixture
def stateless(synthesized: Synthesized, env: str) -> Template:
    return template(synthesized, env, "Stateless")


@pytest.fixture
def config(env: str) -> EnvironmentConfig:
    return SHIPPED[env]


@pytest.fixture(scope="module")
def cost_environments(synthesized: Synthesized) -> dict[str, list[Stack]]:
    return cost.by_environment(load_assembly(synthesized.outdir))


@pytest.fixture(scope="module")
def prices() -> cost.PriceTable:
    return cost.load_prices()


def base_config() -> EnvironmentConfig:
    """The environment a variant test edits (``dataclasses.replace``) to build a configuration none ships: the first
    one. A variant test's assertions hold for any environment."""
    return next(iter(SHIPPED.values()))


def production_config() -> EnvironmentConfig:
    """``base_config()`` made production the way the rules ask (data retained, every table backed up, a domain in
    three zones with dedicated masters): the base of tests of what production demands, whatever ships."""
    base = base_config()
    backed_up = tuple(
        replace(table, settings=replace(table.settings, backup_enabled=True))
        for table in base.additional_tables
    )
    search = replace(
        base.search,
        availability_zone_count=3,
        data_node_count=3,
        replicas=min(max(base.search.replicas, 1), 2),
        master_node_type=base.search.data_node_type,  # a type the base's region offers
        master_node_count=3,
    )
    return replace(
        base,
        production=True,
        removal_policy=RemovalPolicy.RETAIN,
        table=replace(base.table, backup_enabled=True),
        additional_tables=backed_up,
        network=replace(base.network, max_azs=3),
        search=search,
    )


def provisioned_config() -> EnvironmentConfig:
    """``base_config()`` with its main table on provisioned capacity (auto-scaled up to 200 read units)."""
    base = base_config()
    table = replace(
        base.table,
        capacity_mode=CapacityMode.PROVISIONED,
        provisioned=ProvisionedCapacity(min_read=5, max_read=200, min_write=5, max_write=200),
    )
    return replace(base, table=table, ops=replace(base.ops, scan_read_units_per_second=100))


def read_roles(config: EnvironmentConfig) -> tuple[ReadRole, ...]:
    """The read roles of ``config``, for a test that asserts on each of them."""
    for role in config.search.read_roles:
        coverage.covers(f"role:{config.name}/{role.name}")
    return config.search.read_roles


def table_ids(stateful: Template, config: EnvironmentConfig) -> dict[str, str]:
    """Construct id -> logical id of each source table of ``config`` (the main table "Table" first)."""
    tables = stateful.find_resources("AWS::DynamoDB::Table")
    found = {}
    for plan in config.source_tables:
        coverage.covers(f"table:{config.name}/{plan.construct_id}")
        (logical_id,) = [i for i in tables if re.fullmatch(rf"{plan.construct_id}[0-9A-F]{{8}}", i)]
        found[plan.construct_id] = logical_id
    assert sorted(found.values()) == sorted(tables), (
        f"tables that config does not declare: {sorted(set(tables) - set(found.values()))}"
    )
    return found
