"""`python -m ops <command>`: reindex, reconcile and redrive, each printing one JSON summary.

Settings come from flags, defaulting to the environment variables the functions use: `--table`
(TABLE_NAME), `--endpoint` (OPENSEARCH_ENDPOINT), `--region` (AWS_REGION, AWS_DEFAULT_REGION),
`--geometry-bucket` (GEOMETRY_BUCKET). Requests are signed with the caller's AWS credentials.
Exit status: 0 done (or nothing to do), 1 work left (differences, failed writes, an unfinished flow),
2 usage or OpenSearch errors.
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

from ops.index import IndexClient, OpsError

DEFAULT_TIMEOUT_SECONDS = 30.0


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--schema", type=_indexable, required=True, help="an indexable schema name")
        sub.add_argument("--table", default=_env("TABLE_NAME"), help="DynamoDB table (TABLE_NAME)")
        sub.add_argument(
            "--endpoint", default=_env("OPENSEARCH_ENDPOINT"), help="domain endpoint (OPENSEARCH_ENDPOINT)"
        )
        sub.add_argument("--region", default=_env("AWS_REGION", "AWS_DEFAULT_REGION"), help="(AWS_REGION)")
        sub.add_argument(
            "--geometry-bucket",
            default=_env("GEOMETRY_BUCKET"),
            help="the only bucket geometryUrl may name (GEOMETRY_BUCKET)",
        )
        sub.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS, help="per request, seconds"
        )
        sub.add_argument("--dry-run", action="store_true", help="report, change nothing")

    reindex = commands.add_parser("reindex", help="move aliases to the newest version and backfill it")
    common(reindex)
    reindex.add_argument(
        "--max-rejected",
        type=int,
        default=0,
        help="swap the read alias even if up to this many items cannot be indexed (default 0)",
    )
    reconcile = commands.add_parser("reconcile", help="compare DynamoDB with the write index")
    common(reconcile)
    reconcile.add_argument("--fix", action="store_true", help="repair every difference found")
    commands.add_parser(
        "redrive",
        help="redrive the sync's DLQ (stream_sync.redrive); other arguments pass through",
        add_help=False,
    )
    return parser


def _redrive(argv: Sequence[str]) -> int:
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


def run(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """Wire real clients and run one command: (summary, finished)."""
    import boto3
    from search.transport import OpenSearchTransport
    from stream_sync.aws import build_ports
    from stream_sync.config import Settings
    from stream_sync.redrive import item_reader

    from ops.reconcile import reconcile
    from ops.reindex import reindex
    from ops.table import scan_pages

    missing = [
        flag
        for flag, value in (("--table", args.table), ("--endpoint", args.endpoint), ("--region", args.region))
        if not value
    ]
    if missing:
        raise OpsError(f"{', '.join(missing)} required (or set their environment variables)")
    settings = Settings(
        opensearch_endpoint=args.endpoint,
        region=args.region,
        dlq_url="",  # never used: ops writes report permanent failures instead of dead-lettering them
        geometry_bucket=args.geometry_bucket,
        request_timeout_seconds=args.timeout,
    )
    transport = OpenSearchTransport(args.endpoint, args.region, timeout_seconds=args.timeout)
    client = IndexClient(transport)
    dynamodb = boto3.client("dynamodb", region_name=args.region)
    schema: Schema = args.schema

    def scan() -> Any:
        return scan_pages(dynamodb, args.table, schema)

    try:
        if args.command == "reindex":
            report = reindex(
                schema.name,
                client=client,
                scan=scan,
                settings=settings,
                ports=build_ports(settings),
                dry_run=args.dry_run,
                max_rejected=args.max_rejected,
            )
            return report.summary(), report.complete or args.dry_run
        result = reconcile(
            schema.name,
            client=client,
            scan=scan,
            get_item=item_reader(dynamodb, args.table),
            settings=settings,
            ports=build_ports(settings),
            fix=args.fix and not args.dry_run,
        )
        return result.summary(), result.clean
    finally:
        transport.close()


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["redrive"]:
        return _redrive(arguments[1:])
    args = _parser().parse_args(arguments)
    try:
        summary, finished = run(args)
    except (OpsError, ConfigError, BotoCoreError, ClientError) as error:
        print(json.dumps({"command": args.command, "error": f"{type(error).__name__}: {error}"}))
        return 2
    print(json.dumps(summary, default=str))
    return 0 if finished else 1
