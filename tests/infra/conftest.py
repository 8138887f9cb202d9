"""Synthesizes every environment once per test session and shares the templates with all infra tests."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("CDK_VALIDATION", "false")

from aws_cdk import App, Stack, Stage
from aws_cdk.assertions import Template

from infra.app_builder import build_app, committed_context

ENVIRONMENTS = ("dev", "test", "prod")
STACK_KINDS = ("Stateful", "Stateless")


@dataclass(frozen=True)
class Synthesized:
    stages: dict[str, Stage]
    outdir: Path

    def stack(self, env: str, kind: str) -> Stack:
        stack = self.stages[env].node.find_child(kind)
        assert isinstance(stack, Stack)
        return stack

    def template_path(self, env: str, kind: str) -> Path:
        return self.outdir / f"assembly-{env}" / self.stack(env, kind).template_file

    def template_json(self, env: str, kind: str) -> dict:
        return json.loads(self.template_path(env, kind).read_text())


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """All environments in one app, synthesized once, without the nag plugins (tests/infra/test_nag.py
    runs each pack itself so a finding fails one named test instead of the whole session)."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = App(context=committed_context(), outdir=str(outdir))
    stages = build_app(app, nag=False)
    app.synth()
    return Synthesized(stages=stages, outdir=outdir)


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
def config(env: str):  # type: ignore[no-untyped-def]
    from infra.environments import environments

    return environments()[env]


def table_ids(stateful: Template, config) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Construct id -> logical id of each source table of ``config`` (the main table "Table" first)."""
    tables = stateful.find_resources("AWS::DynamoDB::Table")
    found = {}
    for plan in config.source_tables:
        (logical_id,) = [i for i in tables if re.fullmatch(rf"{plan.construct_id}[0-9A-F]{{8}}", i)]
        found[plan.construct_id] = logical_id
    assert sorted(found.values()) == sorted(tables), "a table that config does not declare"
    return found
