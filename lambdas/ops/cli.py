"""`python -m ops <reindex|reconcile|redrive|purge|smoke>`: run an ops workflow, deployed or here.

`--env ENV` (the usual way, from a laptop with AWS credentials): starts the environment's workflow, which runs
inside its VPC on Step Functions and Lambda, shows its progress, prints its summary. `--local`: runs the same
operation in this process against the endpoints given (for someone already inside the VPC), with `--segments`
parallel scan segments on as many threads.

Run it as `.venv/bin/python -m ops ...` from the repository root: the root's `ops` package puts lambdas/ on the path
and hands over the configured environments (from lambdas/, a deployed run needs `--region`, and says so). A deployed
run uses the environment's region from config (infra/environments.py) unless `--region` names another, and the
credentials boto3 finds (AWS_PROFILE after `aws sso login`; without any, it says how to sign in). Local
settings come from flags, defaulting to the environment variables the functions use: `--table` (TABLE_NAME),
`--endpoint` (OPENSEARCH_ENDPOINT), `--region` (AWS_REGION, AWS_DEFAULT_REGION), `--geometry-bucket`
(GEOMETRY_BUCKET). `redrive --local` is `python -m stream_sync.redrive` (its arguments pass through). Both show
progress on stderr. `smoke` runs deployed only (`--assume-role` names the role to run it as) and also prints each
canary's steps, times and the verdict on stderr. Every command prints one JSON summary. Exit status: 0 done (or
nothing to do), 1 work left (differences, refused documents, messages left: read the summary), 2 failed (a smoke
run's failed verdict too), or a usage or configuration error.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from botocore.credentials import DeferredRefreshableCredentials
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    NoCredentialsError,
    PartialCredentialsError,
    SSOError,
    TokenRetrievalError,
)
from refdata.registry import REGISTRY, Schema
from stream_sync.config import ConfigError
from stream_sync.tables import SchemaTables

from ops.advice import no_configured_environments, no_credentials
from ops.index import OpsError
from ops.runs import PartState

DEFAULT_TIMEOUT_SECONDS = 30.0
EXIT_STATUS = {"done": 0, "work-left": 1, "failed": 2}
COMMANDS = ("reindex", "reconcile", "redrive", "purge", "smoke")
# No credentials, or a sign-in that cannot give any (an expired or missing SSO token, a failing credential process),
# and what AWS answers to keys it no longer accepts.
SIGNED_OUT = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    SSOError,
    TokenRetrievalError,
)
REFUSED_KEYS = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"}
)


# The environments config builds (infra.environments.environments), set by the repository root's `ops` package
# (this package ships in the Lambda asset, which holds no infra/): None inside the VPC, where --env is not used.
ENVIRONMENTS: Callable[[], Mapping[str, Any]] | None = None


class ConfigUnusable(Exception):
    """The configured environments cannot be built: the message is the config error's one line; ``environment`` the
    environment whose own setting is wrong (None: something the environments share, or not known)."""

    def __init__(self, message: str, environment: str | None = None) -> None:
        super().__init__(message)
        self.environment = environment

    def answer(self, asked: str | None) -> str:
        """The line to print for a command on environment ``asked``: a mistake in another environment says so.
        Every environment is built and checked before any command runs (infra/environments.py builds them in one
        call, some rules span environments, and the checkout that cannot build one cannot deploy any), so it stops
        a command on this one too."""
        if asked is None or self.environment in (None, asked):
            return str(self)
        return (
            f"{self} [in environment {self.environment!r}, not {asked!r} (the one you asked for): every environment "
            "is checked before any command runs; fix it, or set that edit aside, first]"
        )


def asked_environment(arguments: Sequence[str]) -> str | None:
    """The environment ``--env`` names in ``arguments`` (as argparse reads it: ``--env X``, ``--env=X``, ``--en X``)."""
    for index, argument in enumerate(arguments):
        option, equals, value = argument.partition("=")
        if len(option) > 2 and "--env".startswith(option):
            return value if equals else (arguments[index + 1] if index + 1 < len(arguments) else None)
    return None


def configured_environments() -> dict[str, Any] | None:
    """The configured environments by name, or None where no config is at hand (a copy of lambdas/ alone).
    Raises ConfigUnusable when the config has a mistake."""
    return None if ENVIRONMENTS is None else dict(ENVIRONMENTS())


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def _indexable(name: str) -> Schema:
    indexable = sorted(schema_name for schema_name, schema in REGISTRY.items() if schema.indexable)
    schema = REGISTRY.get(name)
    if schema is None:
        close = difflib.get_close_matches(name, indexable, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise argparse.ArgumentTypeError(f"unknown schema {name!r}{hint}; indexable: {', '.join(indexable)}")
    if not schema.indexable:
        raise argparse.ArgumentTypeError(
            f"schema {name!r} is not indexable (it is never in the search domain); indexable: {', '.join(indexable)}"
        )
    return schema


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The CLI's arguments, `--env`'s choices from the configured environments (tests/docs parses what the docs show
    with it)."""
    parser = argparse.ArgumentParser(
        prog="python -m ops",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the epilog's config error stays one line
    )
    commands = parser.add_subparsers(dest="command", required=True)

    try:
        known = configured_environments()
        broken = None
    except ConfigUnusable as error:  # --help still works, and names the mistake once
        known, broken = None, str(error)
    names = sorted(known) if known is not None else None
    env_help = f": one of {', '.join(names)} (infra/environments.py)" if names else ""
    if broken:
        parser.epilog = f"The config has a mistake, so no deployed command can run: {broken}"

    def common(sub: argparse.ArgumentParser, *, schema: bool) -> None:
        where = sub.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--env",
            choices=names,
            metavar="ENV",
            help="run the deployed workflow of this environment" + env_help,
        )
        where.add_argument("--local", action="store_true", help="run here, inside the VPC")
        if schema:
            sub.add_argument("--schema", type=_indexable, required=True, help="an indexable schema name")
        sub.add_argument("--dry-run", action="store_true", help="report, change nothing")
        sub.add_argument(
            "--region",
            default=None,
            help="AWS region (--env: the environment's configured region; --local: AWS_REGION, AWS_DEFAULT_REGION)",
        )
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
    smoke = commands.add_parser(
        "smoke", help="prove the deployed pipeline end to end: write, index, update, delete, read (ops.smoke)"
    )
    smoke.add_argument(
        "--env",
        required=True,
        choices=names,
        metavar="ENV",
        help="the deployed environment to prove" + env_help,
    )
    smoke.add_argument(
        "--region", default=None, help="AWS region (default: the environment's configured region)"
    )
    smoke.add_argument("--no-wait", action="store_true", help="start it, print the execution, return")
    smoke.add_argument(
        "--assume-role", metavar="ROLE_ARN", help="run as this role (the deploy workflow's smoke runner role)"
    )
    smoke.set_defaults(dry_run=False, resume=None)
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


def deployed_region(args: argparse.Namespace) -> str:
    """`--region`, else the environment's configured region."""
    if args.region:
        return str(args.region)
    known = configured_environments()
    if known is None:
        raise OpsError(no_configured_environments(args.env))
    if args.env not in known:
        raise OpsError(f"--region required: no configured environment {args.env!r} to take the region from")
    return str(known[args.env].region)


def utc_now() -> datetime:
    return datetime.now(UTC)


def assumed_session(
    session: Any, role_arn: str, *, session_name: str, clock: Callable[[], datetime] = utc_now
) -> Any:
    """A boto3 session acting as `role_arn`, assumed through `session`, whose credentials botocore renews before
    they expire (`DeferredRefreshableCredentials`: fetched on first use; renewed from 15 minutes before the
    expiry, and blocking from 10), so a run that outlives one role session (at most an hour for the smoke runner
    role) never signs with expired keys. `clock` is the refresh's notion of now (a test advances it)."""
    import boto3
    import botocore.session

    sts = session.client("sts")

    def fetch() -> dict[str, str]:
        issued = sts.assume_role(RoleArn=role_arn, RoleSessionName=session_name)["Credentials"]
        return {
            "access_key": issued["AccessKeyId"],
            "secret_key": issued["SecretAccessKey"],
            "token": issued["SessionToken"],
            "expiry_time": issued["Expiration"].isoformat(),
        }

    assumed = botocore.session.Session()
    assumed._credentials = DeferredRefreshableCredentials(fetch, "assume-role", time_fetcher=clock)
    return boto3.Session(botocore_session=assumed, region_name=session.region_name)


def run_deployed(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    import boto3

    from ops import deployed

    region = deployed_region(args)
    session = boto3.Session(region_name=region)
    if getattr(args, "assume_role", None):
        session = assumed_session(session, args.assume_role, session_name=f"ops-{args.command}")
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
    from refdata.transport import OpenSearchTransport
    from stream_sync.aws import build_ports

    from ops import workflow
    from ops.deployed import new_run_id
    from ops.index import IndexClient
    from ops.purge import Purge, minimum_age_seconds
    from ops.reconcile import Reconcile
    from ops.reindex import Reindex
    from ops.runs import MemoryRunStore, Run

    args.region = args.region or _env("AWS_REGION", "AWS_DEFAULT_REGION")
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
        summary = workflow.run_local(
            operation, env, run, _request(args), concurrency=args.segments, progress=LocalProgress(sys.stderr)
        )
    finally:
        transport.close()
    return summary, EXIT_STATUS[summary["status"]]


class LocalProgress:
    """A `--local` run's progress on stderr, in the deployed run's form, after every page a part commits (the
    parts run on threads: one line at a time)."""

    def __init__(self, err: TextIO) -> None:
        self._err = err
        self._states: dict[str, PartState] = {}
        self._lock = threading.Lock()
        self._shown = ""

    def __call__(self, record: Mapping[str, Any], state: PartState) -> None:
        from ops.deployed import progress_line
        from ops.runs import part_id

        with self._lock:
            self._states[part_id(state.part)] = state
            parts = int(record.get("partCount", len(record.get("parts", []))))
            line = progress_line(record.get("expectedItems"), self._states.values(), parts)
            if line != self._shown:
                tty = self._err.isatty()
                self._err.write(f"\r{line}" if tty else f"{line}\n")
                self._err.flush()
                self._shown = line


def redrive_settings() -> argparse.ArgumentParser:
    """The settings `redrive --local` reads as the other local runs do; the rest goes to `stream_sync.redrive`."""
    settings = argparse.ArgumentParser(add_help=False)
    settings.add_argument("--endpoint")
    settings.add_argument("--region")
    settings.add_argument("--geometry-bucket")
    return settings


def _redrive_here(argv: Sequence[str]) -> int:
    """`stream_sync.redrive.main`, with --endpoint/--region/--geometry-bucket/--queue-url as settings."""
    from stream_sync import redrive

    known, rest = redrive_settings().parse_known_args(argv)
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
    if not {"-h", "--help"} & set(arguments):
        try:
            configured_environments()
        except ConfigUnusable as error:  # one line, as every entry point answers a config mistake
            print(error.answer(asked_environment(arguments)), file=sys.stderr)
            return 2
    args = build_parser().parse_args(arguments)
    try:
        summary, status = run_deployed(args) if args.env else run_local(args)
    except (OpsError, ConfigError, BotoCoreError, ClientError, ValueError) as error:
        if signed_out(error):
            print(no_credentials(error), file=sys.stderr)
        failed: dict[str, Any] = {"command": args.command, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(failed | _dry_run_note(args)))
        return EXIT_STATUS["failed"]
    if args.command == "smoke":
        from ops.smoke import render

        print(render(summary), file=sys.stderr)
    if status == EXIT_STATUS["failed"]:
        summary = summary | _dry_run_note(args)
    print(json.dumps(summary, default=str))
    return status


def signed_out(error: Exception) -> bool:
    """Whether `error` means this process has no usable AWS credentials (the fix is a sign-in, not the command)."""
    if isinstance(error, ClientError):
        return error.response.get("Error", {}).get("Code") in REFUSED_KEYS
    return isinstance(error, SIGNED_OUT)


def _dry_run_note(args: argparse.Namespace) -> dict[str, Any]:
    """What a failed dry run says of itself: that it was one, and that it changed nothing."""
    if not args.dry_run:
        return {}
    return {"dryRun": True, "note": "this was a dry run: it changed nothing"}
