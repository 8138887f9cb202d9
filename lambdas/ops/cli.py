"""`python -m ops <reindex|reconcile|redrive|purge>`: run an ops workflow, deployed or here.

`--env ENV` (the usual way, from a laptop with AWS credentials): starts the environment's workflow, which runs
inside its VPC on Step Functions and Lambda, shows its progress, prints its summary. `--local`: runs the same
operation in this process against the endpoints given (for someone already inside the VPC), with `--segments`
parallel scan segments on as many threads.

Local settings come from flags, defaulting to the environment variables the functions use: `--table`
(TABLE_NAME), `--endpoint` (OPENSEARCH_ENDPOINT), `--region` (AWS_REGION, AWS_DEFAULT_REGION),
`--geometry-bucket` (GEOMETRY_BUCKET). `redrive --local` is `python -m stream_sync.redrive` (its arguments pass
through). Every command prints one JSON summary. Exit status: 0 done (or nothing to do), 1 work left
(differences, refused documents, messages left: read the summary), 2 failed, or a usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from datamodel.registry import REGISTRY, Schema
from stream_sync.config import ConfigError
from stream_sync.tables import SchemaTables

from ops.index import OpsError

DEFAULT_TIMEOUT_SECONDS = 30.0
EXIT_STATUS = {"done": 0, "work-left": 1, "failed": 2}
COMMANDS = ("reindex", "reconcile", "redrive", "purge")


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _indexable(name: str) -> Schema:
    schema = REGISTRY.get(name)
    if schema is None:
        raise argparse.ArgumentTypeError(f"unknown schema {name!r} (known: {', '.join(sorted(REGISTRY))})")
    if not schema.indexable:
        raise argparse.ArgumentTypeError(f"schema {name!r} is not indexable")
    return schema


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser, *, schema: bool) -> None:
        where = sub.add_mutually_exclusive_group(required=True)
        where.add_argument("--env", help="run the deployed workflow of this environment (dev, test, prod)")
        where.add_argument("--local", action="store_true", help="run here, inside the VPC")
        if schema:
            sub.add_argument("--schema", type=_indexable, required=True, help="an indexable schema name")
        sub.add_argument("--dry-run", action="store_true", help="report, change nothing")
        sub.add_argument("--region", default=_env("AWS_REGION", "AWS_DEFAULT_REGION"), help="(AWS_REGION)")
        deployed = sub.add_argument_group("deployed runs (--env)")
        deployed.add_argument(
            "--resume", metavar="RUN_ID", help="go on with an earlier run from where it stopped"
        )
        deployed.add_argument("--no-wait", action="store_true", help="start it, print the execution, return")
        local = sub.add_argument_group("local runs (--local)")
        local.add_argument(
            "--table",
            default=_env("TABLE_NAME"),
            help="the DynamoDB table that holds the schema (TABLE_NAME)",
        )
        local.add_argument(
            "--endpoint", default=_env("OPENSEARCH_ENDPOINT"), help="domain endpoint (OPENSEARCH_ENDPOINT)"
        )
        local.add_argument(
            "--geometry-bucket",
            default=_env("GEOMETRY_BUCKET"),
            help="the only bucket geometryUrl may name (GEOMETRY_BUCKET)",
        )
        local.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="per request, seconds"
        )
        local.add_argument(
            "--segments", type=_positive, default=1, help="parallel scan segments, run on as many threads"
        )
        if schema:
            deployed.add_argument(
                "--source",
                choices=("auto", "scan", "export"),
                default="auto",
                help="read the table by parallel scan or DynamoDB export (auto: by the table's size)",
            )

    reindex = commands.add_parser("reindex", help="move aliases to the newest version and backfill it")
    common(reindex, schema=True)
    reindex.add_argument(
        "--max-rejected",
        type=int,
        default=0,
        help="swap the read alias even if up to this many items cannot be indexed (default 0)",
    )
    reconcile = commands.add_parser("reconcile", help="compare DynamoDB with the write index")
    common(reconcile, schema=True)
    reconcile.add_argument("--fix", action="store_true", help="repair every difference found")
    purge = commands.add_parser("purge", help="delete tombstones no late change can reach any more")
    common(purge, schema=False)
    purge.add_argument(
        "--min-age-seconds",
        type=int,
        default=None,
        help="(--local) tombstone age to keep; default: stream retention + 6 h record age + DLQ retention",
    )
    redrive = commands.add_parser("redrive", help="redrive the sync's dead-letter queue")
    common(redrive, schema=False)
    return parser


def _request(args: argparse.Namespace) -> dict[str, Any]:
    request: dict[str, Any] = {"dryRun": bool(args.dry_run)}
    if getattr(args, "schema", None) is not None:
        request["schema"] = args.schema.name
        request["source"] = args.source
    if args.command == "reindex":
        request["maxRejected"] = args.max_rejected
    if args.command == "reconcile":
        request["fix"] = bool(args.fix)
    return request


def run_deployed(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    import boto3

    from ops import deployed

    session = boto3.Session(region_name=args.region)
    deployment = deployed.resolve(session.client("cloudformation"), args.env)
    sfn, s3 = session.client("stepfunctions"), session.client("s3")
    subject = args.schema.name if getattr(args, "schema", None) is not None else None
    run_id = args.resume or deployed.new_run_id(args.command, subject)
    execution = deployed.start(
        sfn, deployment, args.command, _request(args), run_id=run_id, resume=args.resume is not None
    )
    print(f"{args.command} run {run_id}: {execution}", file=sys.stderr)
    if args.no_wait:
        return {"command": args.command, "runId": run_id, "execution": execution, "status": "started"}, 0
    status, summary, failure = deployed.follow(sfn, s3, deployment, args.command, run_id, execution)
    result = dict(summary or {"command": args.command, "runId": run_id})
    result["execution"] = {"arn": execution, "status": status}
    if failure:
        result["execution"]["failure"] = failure
    if status != "SUCCEEDED":
        return result, EXIT_STATUS["failed"]
    return result, EXIT_STATUS.get(str(result.get("status")), EXIT_STATUS["failed"])


def run_local(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """Wire the caller's clients and run one operation here."""
    import boto3
    from search.transport import OpenSearchTransport
    from stream_sync.aws import build_ports

    from ops import workflow
    from ops.deployed import new_run_id
    from ops.index import IndexClient
    from ops.purge import Purge, minimum_age_seconds
    from ops.reconcile import Reconcile
    from ops.reindex import Reindex
    from ops.runs import MemoryRunStore, Run

    required = [("--endpoint", args.endpoint), ("--region", args.region)]
    if args.command != "purge":
        required.append(("--table", args.table))
    missing = [flag for flag, value in required if not value]
    if missing:
        raise OpsError(f"{', '.join(missing)} required (or set their environment variables)")
    # A local run reads one schema's table (or none): --table is the one that holds it.
    tables = SchemaTables.single(args.table) if args.table else SchemaTables()
    settings = workflow.sync_settings(args.endpoint, args.region, args.geometry_bucket, args.timeout, tables)
    transport = OpenSearchTransport(args.endpoint, args.region, timeout_seconds=args.timeout)
    operations: dict[str, workflow.Operation] = {
        "reindex": Reindex(),
        "reconcile": Reconcile(),
        "purge": Purge(),
    }
    operation = operations[args.command]
    env = workflow.Env(
        client=IndexClient(transport),
        settings=settings,
        ports=lambda: build_ports(settings),
        dynamodb=boto3.client("dynamodb", region_name=args.region),
        tables=tables,
        segments=args.segments,
        tombstone_min_age_seconds=(
            args.min_age_seconds if getattr(args, "min_age_seconds", None) else minimum_age_seconds(21600)
        ),
    )
    subject = args.schema.name if getattr(args, "schema", None) is not None else None
    run = Run(MemoryRunStore(), args.command, new_run_id(args.command, subject))
    try:
        summary = workflow.run_local(operation, env, run, _request(args), concurrency=args.segments)
    finally:
        transport.close()
    return summary, EXIT_STATUS[summary["status"]]


def _redrive_here(argv: Sequence[str]) -> int:
    """`stream_sync.redrive.main`, with --endpoint/--region/--geometry-bucket/--queue-url as settings."""
    from stream_sync import redrive

    settings = argparse.ArgumentParser(add_help=False)
    settings.add_argument("--endpoint")
    settings.add_argument("--region")
    settings.add_argument("--geometry-bucket")
    known, rest = settings.parse_known_args(argv)
    for variable, value in (
        ("OPENSEARCH_ENDPOINT", known.endpoint),
        ("AWS_REGION", known.region),
        ("GEOMETRY_BUCKET", known.geometry_bucket),
    ):
        if value:
            os.environ[variable] = value
    queue = next((arg.split("=", 1)[1] for arg in rest if arg.startswith("--queue-url=")), None)
    if "--queue-url" in rest[:-1]:
        queue = rest[rest.index("--queue-url") + 1]
    if queue:
        os.environ["DLQ_URL"] = queue  # the sync's settings require it even though --queue-url wins
    return redrive.main(list(rest))


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["redrive"] and "--local" in arguments:
        return _redrive_here([arg for arg in arguments[1:] if arg != "--local"])
    args = _parser().parse_args(arguments)
    try:
        summary, status = run_deployed(args) if args.env else run_local(args)
    except (OpsError, ConfigError, BotoCoreError, ClientError, ValueError) as error:
        print(json.dumps({"command": args.command, "error": f"{type(error).__name__}: {error}"}))
        return EXIT_STATUS["failed"]
    print(json.dumps(summary, default=str))
    return status
