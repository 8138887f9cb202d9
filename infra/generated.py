"""What config alone defines, written where people read it: docs/environments.md's per-environment table and the
deliver workflow's jobs (one per environment, in config order).

    python -m infra.generated --write     (``make docs``: after adding, removing or changing an environment)
    python -m infra.generated --check     fails, naming the stale files (tests/infra/test_generated.py runs it)

Nothing else names an environment by hand: the deploy workflow reads the environment's role and region from config
at run time (``python -m infra.report --deploy-target``), and the cost page is written by ``make cost``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from infra.config import CapacityMode, EnvironmentConfig, TableSettings, data_schemas
from infra.files import write

ROOT = Path(__file__).resolve().parent.parent
ENVIRONMENTS_DOC = ROOT / "docs" / "environments.md"
DELIVER = ROOT / ".github" / "workflows" / "deliver.yml"
TABLE_BEGIN = (
    "<!-- environments-table:begin (make docs: python -m infra.generated, from infra/environments.py) -->"
)
TABLE_END = "<!-- environments-table:end -->"
# A release: a v* tag, or a manual run of deliver on main. Only a release reaches a production environment.
RELEASE = "startsWith(github.ref, 'refs/tags/v') || (github.ref == 'refs/heads/main' && github.event_name == 'workflow_dispatch')"


def _tables(config: EnvironmentConfig) -> str:
    every = set(data_schemas())
    parts = []
    for plan in config.source_tables:
        held = "every schema" if set(plan.schemas) == every else ", ".join(plan.schemas)
        parts.append(f"`{plan.construct_id}` ({held})")
    return ", ".join(parts)


def _capacity(config: EnvironmentConfig) -> str:
    modes = {
        "on-demand" if plan.settings.capacity_mode is CapacityMode.ON_DEMAND else "provisioned + auto scaling"
        for plan in config.source_tables
    }
    if len(modes) == 1:
        return modes.pop()
    return ", ".join(
        f"`{plan.construct_id}` {'on-demand' if plan.settings.capacity_mode is CapacityMode.ON_DEMAND else 'provisioned'}"
        for plan in config.source_tables
    )


def _switches(config: EnvironmentConfig) -> str:
    def one(settings: TableSettings) -> str:
        backup = f"{settings.backup_retention_days} days" if settings.backup_enabled else "off"
        return f"{'on' if settings.contributor_insights else 'off'} / {backup}"

    shown = {one(plan.settings) for plan in config.source_tables}
    if len(shown) == 1:
        return shown.pop()
    return ", ".join(f"`{plan.construct_id}` {one(plan.settings)}" for plan in config.source_tables)


def _search(config: EnvironmentConfig) -> str:
    search = config.search
    text = f"{search.data_node_count} × {search.data_node_type.removesuffix('.search')}, {search.availability_zone_count} AZ"
    if search.master_node_count:
        text += f", {search.master_node_count} dedicated masters"
    return text


def _replicas(config: EnvironmentConfig) -> str:
    return f"{config.search.replicas}" + (" (one data node)" if config.search.data_node_count == 1 else "")


def _reserved(config: EnvironmentConfig) -> str:
    names = {"stream sync": "sync", "index bootstrap": "bootstrap", "bootstrap provider": "provider"}
    reserved = config.concurrency_reservations()
    return ", ".join(f"{names.get(name, name)} {count}" for name, count in reserved.items()) or "none"


def _quota(config: EnvironmentConfig) -> str:
    quota = config.required_concurrency_quota()
    return f"{quota}" + (" (a new account's)" if not config.concurrency_reservations() else "")


def _ops(config: EnvironmentConfig) -> str:
    ops = config.ops
    return f"{ops.max_concurrency} / {ops.scan_segments} / {ops.export_above_bytes / 2**30:.1f} GiB"


ROWS: tuple[tuple[str, Callable[[EnvironmentConfig], str]], ...] = (
    ("account / region", lambda c: f"{c.account} / {c.region}"),
    (
        "deployed by `deliver`",
        lambda c: "on a release (tag `v*`)" if c.production else "on every push to `main`",
    ),
    ("removal policy", lambda c: "retain" if c.retains_data else "destroy (auto-delete buckets)"),
    ("source tables", _tables),
    ("table capacity", _capacity),
    ("contributor insights / backup", _switches),
    ("VPC", lambda c: c.network.existing_vpc_id or f"{c.network.cidr}, {c.network.max_azs} AZ"),
    ("OpenSearch", _search),
    ("replicas per shard", _replicas),
    ("read roles", lambda c: ", ".join(f"`{role.name}`" for role in c.search.read_roles) or "none"),
    ("log retention", lambda c: f"{c.log_retention_days} days"),
    ("reserved concurrency", _reserved),
    ("Lambda concurrency quota needed", _quota),
    ("ops workflows: workers at once / scan segments / export above", _ops),
)


def environments_table(configs: Mapping[str, EnvironmentConfig]) -> str:
    """docs/environments.md's per-environment table, one column per environment in config order."""
    lines = [
        "| | " + " | ".join(configs) + " |",
        "|---|" + "---|" * len(configs),
        *(f"| {label} | " + " | ".join(row(c) for c in configs.values()) + " |" for label, row in ROWS),
    ]
    return "\n".join(lines)


def with_table(doc: str, table: str) -> str:
    start, end = doc.find(TABLE_BEGIN), doc.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"docs/environments.md lacks the markers {TABLE_BEGIN!r} ... {TABLE_END!r}")
    return doc[: start + len(TABLE_BEGIN)] + "\n" + table + "\n" + doc[end:]


DELIVER_HEADER = """\
# GENERATED by `make docs` (python -m infra.generated) from infra/environments.py: edit the config, not this file.
#
# Deploys through the environments in config order, each with the reusable deploy.yml: every push to main goes
# through each non-production environment; a release (a v* tag, or a manual run on main) goes on to the production
# ones. A production environment's GitHub environment holds the required reviewers and allows only main and v* tags
# (docs/deploy.md, "Deploy from GitHub Actions").
#
# A release is never skipped silently: each deploy job queues in its environment's concurrency group (deploy.yml,
# `queue: max`) instead of being cancelled while pending when a later push arrives, and the last job fails the run,
# naming the environment, if a release did not reach every production environment.
name: deliver

on:
  push:
    branches: [main]
    tags: ["v*"]
  workflow_dispatch:

permissions:
  contents: read

concurrency:
  group: deliver-${{ github.ref }}
  cancel-in-progress: false
  queue: max

jobs:
"""


def deliver_workflow(configs: Mapping[str, EnvironmentConfig]) -> str:
    """deliver.yml: a job per environment, each after the one before it; production ones only on a release."""
    text = DELIVER_HEADER
    previous: str | None = None
    production = []
    for name, config in configs.items():
        text += f"  {name}:\n"
        if previous is not None:
            text += f"    needs: {previous}\n"
        if config.production:
            text += f"    if: {RELEASE}\n"
            production.append(name)
        text += (
            "    uses: ./.github/workflows/deploy.yml\n"
            "    permissions:\n"
            "      contents: read\n"
            "      id-token: write\n"
            "    with:\n"
            f"      environment: {name}\n"
            f"      production: {'true' if config.production else 'false'}\n\n"
        )
        previous = name
    if production:
        text += (
            "  released:\n"
            "    name: a release reached every production environment\n"
            f"    needs: [{', '.join(production)}]\n"
            f"    if: always() && ({RELEASE})\n"
            "    runs-on: ubuntu-latest\n"
            "    steps:\n"
            "      - name: Fail the release unless every production deploy succeeded\n"
            "        env:\n"
            "          NEEDS: ${{ toJSON(needs) }}\n"
            "        run: |\n"
            '          missed=$(jq -r \'to_entries[] | select(.value.result != "success") | "\\(.key): \\(.value.result)"\' <<< "$NEEDS")\n'
            '          if [ -n "$missed" ]; then\n'
            "            echo \"::error::this release did not reach production (${missed//$'\\n'/, }): run deliver again on this tag\"\n"
            "            exit 1\n"
            "          fi\n"
        )
    return text.rstrip("\n") + "\n"


def outputs(configs: Mapping[str, EnvironmentConfig]) -> dict[Path, str]:
    """Every generated file with the content config implies."""
    return {
        ENVIRONMENTS_DOC: with_table(ENVIRONMENTS_DOC.read_text(), environments_table(configs)),
        DELIVER: deliver_workflow(configs),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m infra.generated", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the generated files")
    mode.add_argument("--check", action="store_true", help="fail if a generated file is stale")
    return parser


def main(argv: list[str] | None = None) -> int:
    from infra.environments import environments

    args = build_parser().parse_args(argv)
    stale = [path for path, text in outputs(environments()).items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run `make docs`)", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs(environments()).items():
        write(path, text)
    return 0


if __name__ == "__main__":
    from infra.validation import run

    run(main)
