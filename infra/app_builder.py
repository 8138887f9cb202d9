"""Builds the CDK app: one stage per environment, each with a stateful and a stateless stack."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The runtime packages (key conventions, search) live in lambdas/, the root of every Lambda asset.
if str(ROOT / "lambdas") not in sys.path:
    sys.path.insert(0, str(ROOT / "lambdas"))

from aws_cdk import App, Environment, Stage, Validations  # noqa: E402

from infra.config import ConfigError, EnvironmentConfig  # noqa: E402
from infra.environments import environments  # noqa: E402
from infra.nag import RULE_PACKS  # noqa: E402
from infra.stacks.stateful import StatefulStack  # noqa: E402
from infra.stacks.stateless import StatelessStack  # noqa: E402


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
            raise ConfigError(f"{key}: unknown environment {name!r}; known: {sorted(known)}")
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
