"""Builds the CDK app: one stage per environment, each with a stateful and a stateless stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Stage, Validations

from infra.config import EnvironmentConfig, unknown_environment
from infra.environments import environments
from infra.nag import RULE_PACKS
from infra.stacks.stateful import StatefulStack
from infra.stacks.stateless import StatelessStack

ROOT = Path(__file__).resolve().parent.parent


def committed_context() -> dict[str, Any]:
    """cdk.json's context plus cdk.context.json: what the CDK CLI would pass, for runs without the CLI."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    context.update(json.loads((ROOT / "cdk.context.json").read_text()))
    return context


def account_overrides(app: App, *, known: set[str]) -> dict[str, str]:
    """Account ids passed as context ``account.<env>=<id>``; naming an unknown environment is an error."""
    overrides = {}
    for key, value in app.node.get_all_context().items():
        if not key.startswith("account."):
            continue
        name = key.removeprefix("account.")
        if name not in known:
            raise unknown_environment(name, known, where=key)
        overrides[name] = str(value)
    return overrides


def build_environment(app: App, config: EnvironmentConfig) -> Stage:
    stage = Stage(app, config.name, env=Environment(account=config.account, region=config.region))
    stateful = StatefulStack(
        stage,
        "Stateful",
        config=config,
        description=f"Reference data ({config.name}): state",
        termination_protection=config.retains_data,
    )
    StatelessStack(
        stage,
        "Stateless",
        config=config,
        stateful=stateful,
        description=f"Reference data ({config.name}): functions and queues",
    )
    return stage


def build_app(app: App, *, nag: bool = True) -> dict[str, Stage]:
    """Adds every environment to ``app``; with ``nag`` the five rule packs run at synth and fail it on findings.

    Account ids come from ``infra/environments.py`` unless context ``account.<env>`` overrides them.
    """
    overrides = account_overrides(app, known=set(environments()))
    if nag:
        Validations.of(app).add_plugins(*(pack(app) for pack in RULE_PACKS))
    return {name: build_environment(app, config) for name, config in environments(overrides).items()}
