"""A deployed environment for the smoke run, in one process: the real CLI starts the real smoke workflow (the
state machine the stack synthesizes, executed by moto's Step Functions), whose Task states invoke the real ops
worker in-process (moto would start Docker); moto DynamoDB tables with streams as the environment's config lays
them out, moto Lambda event source mappings, and the loopback OpenSearch server with FGAC, set up by the real
index bootstrap with the configured read roles and their probes.

Lambda's event source mapping poller is the one part played here (`Poller`): it reads each table's stream through
moto's DynamoDB Streams API while the mapping is enabled, applies the mapping's filter (the indexable schemas the
table holds), invokes the real sync handler with the records as a Lambda event, redelivers from a partial batch
response, and, as Lambda does, records the last processing result on the mapping (`PROBLEM: Function call failed`
when the function raises; moto always answers none).

Time is virtual (`VirtualTime`): the smoke run's clock and sleep are handed in, and each of its sleeps first drives
one poll of every mapping, then advances the clock. A canary reaches the index at the smoke run's first wait, however
loaded the machine, and a wait that is to time out does so after a fixed number of polls, not seconds: no thread
polls on the real clock, and no verdict depends on the machine's speed. The workflow's own Wait states (the smoke
workflow's start-up checks) pass on the same clock (`on_the_clock`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import boto3
import pytest
from botocore.credentials import Credentials
from index_bootstrap.bootstrap import IndexBootstrap
from moto import mock_aws
from refdata import indexnames
from refdata.registry import indexable_schemas
from refdata.reserved import CANARY, scope_of
from refdata.transport import OpenSearchTransport
from search.readers import read_role_definitions
from stream_sync import handler
from workflows_harness import (
    Clock,
    MotoGaps,
    deployed_names,
    domain_access,
    follow,
    report_decisions,
    settle,
    template_policies,
)

from infra.config import EnvironmentConfig
from infra.constructs.ops_workflows import Targets, definition, state_machine_name
from ops import deployed, worker
from tests.integration.sync_harness import lambda_format
from tests.support.aws import (
    EMPTY_ZIP,
    Context,
    create_bucket,
    moto_role_of_access_key,
    single_table,
    use_fake_aws,
)
from tests.support.engine_node import EngineNode
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

REGION = "ca-central-1"
ACCOUNT = "123456789012"
ADMIN_KEY, SYNC_KEY = "AKIDADMIN", "AKIDSYNC"
OPS_BUCKET, GEOMETRY_BUCKET = "refdata-ops", "refdata-geometry"
WORKER, SYNC = "ops-worker", "stream-sync"


def table_name(construct_id: str) -> str:
    return f"refdata-{construct_id.lower()}"


@dataclass
class Poller:
    """Lambda's event source mapping poller, for every table (see the module doc)."""

    streams: dict[str, str]  # table name -> stream ARN
    prefixes: dict[str, tuple[str, ...]]  # table name -> the pk prefixes its filter admits
    mappings: dict[str, str]  # table name -> mapping UUID
    invocations: int = 0
    lines: list[str] = field(default_factory=list)
    account: str = ACCOUNT
    region: str = REGION
    # the sync runs as its role (`acting`); the poller's own stream reads are Lambda's, as the service (`service`)
    acting: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    service: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    # A new mapping starts polling a while after it is created (AWS: "may take several minutes"): table -> seconds
    # of the run's clock (`now`) before its first poll.
    starts: dict[str, float] = field(default_factory=dict)
    now: Callable[[], float] = lambda: 0.0
    # one poll at a time, as one poller per shard
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _iterators: dict[tuple[str, str], str] = field(default_factory=dict)
    _pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._client = boto3.client("dynamodbstreams", region_name=self.region)

    def capture(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The sync's log and EMF lines go to `lines`, as Lambda sends a function's stdout to its log group.
        Not by redirecting sys.stdout: that is one for the whole process, so this thread's redirect swapped it
        under the CLI's prints (its summary lost, or written to the closed capture of a test that had ended:
        "I/O operation on closed file")."""
        for module in (handler.telemetry, handler.heartbeat):
            monkeypatch.setattr(module, "emit", functools.partial(module.emit, write=self.lines.append))

    def poll_all(self) -> None:
        """One poll of every table's mapping (from whichever thread waits: a smoke part, a test). The clock is read
        before the poller's lock is taken: a sleep holds the clock while it polls (VirtualTime.sleep)."""
        now = self.now()
        with self._lock:
            for table in self.streams:
                self.poll(table, now)

    def _mapping(self, table: str) -> Any:
        from moto.awslambda.models import lambda_backends

        return lambda_backends[self.account][self.region]._event_source_mappings[self.mappings[table]]

    def _new_records(self, table: str) -> list[dict[str, Any]]:
        arn = self.streams[table]
        records = []
        for shard in self._client.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            key = (table, shard["ShardId"])
            iterator = (
                self._iterators.get(key)
                or self._client.get_shard_iterator(
                    StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            )
            page = self._client.get_records(ShardIterator=iterator)
            self._iterators[key] = page["NextShardIterator"]
            for record in page["Records"]:
                converted = lambda_format(record)
                converted["eventSourceARN"] = arn
                records.append(converted)
        return records

    def poll(self, table: str, now: float) -> None:
        mapping = self._mapping(table)
        if not mapping.enabled or now < self.starts.get(table, 0.0):
            return
        with self.service():
            fresh = [] if self._pending.get(table) else self._new_records(table)
        batch = self._pending.get(table) or [
            record
            for record in fresh
            if record["dynamodb"]["Keys"]["pk"]["S"].startswith(self.prefixes[table])
        ]
        if not batch:
            return
        self.invocations += 1
        try:
            with self.acting():
                response = handler.handler({"Records": batch}, Context(60))
        except Exception:
            mapping.last_processing_result = "PROBLEM: Function call failed"
            self._pending[table] = batch  # Lambda retries the batch
            return
        mapping.last_processing_result = "OK"
        failures = response["batchItemFailures"]
        # Lambda redelivers the batch from its first failed record
        sequences = [record["dynamodb"]["SequenceNumber"] for record in batch]
        self._pending[table] = batch[sequences.index(failures[0]["itemIdentifier"]) :] if failures else []


class VirtualTime:
    """The smoke run's clock: each sleep drives one poll of every mapping, then advances the clock by the time slept
    (shared by every part of a run, so a wait that is to time out ends after a bounded number of polls). Each virtual
    second that passes refreshes the engine's indices, as its `index.refresh_interval` (one second) does in real
    time: what the sync wrote becomes searchable as it would on a domain that long after."""

    def __init__(self, poller: Poller, engine: EngineNode | None = None) -> None:
        self.poller = poller
        self.engine = engine
        poller.now = self.monotonic
        # the wall clock when the stack was stood up; then time moves only virtually
        self._epoch = time.time()
        self._now = 0.0
        # Held by a sleep from its poll through its advance, and by every read: a wait that read the clock after its
        # write sees time pass only with a poll after that write (one part's long sleep once jumped another part's
        # deadline between that part's write and any poll, and its canary "did not arrive").
        self._lock = threading.RLock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def now(self) -> float:
        with self._lock:
            return self._epoch + self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            before, self._now = self._now, self._now + seconds
            refresh = self.engine is not None and int(self._now) > int(before)
        if refresh:
            assert self.engine is not None
            self.engine.request("POST", "/_refresh")

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.poller.poll_all()
            self.advance(seconds)


@dataclass
class SmokeStack:
    """The environment `config` describes, deployed into moto and the loopback server."""

    config: EnvironmentConfig
    server: LoopbackOpenSearch
    poller: Poller
    clock: VirtualTime
    tables: dict[str, str]  # schema -> table name
    probes: dict[str, str]  # read role -> probe role ARN
    admin: OpenSearchTransport
    dlq_url: str
    # The workflow's Wait states, as their seconds on the run's clock, and each worker invocation's (step, seconds).
    workflow_waits: list[float] = field(default_factory=list)
    invocations: list[tuple[str, float]] = field(default_factory=list)
    lambda_: Any = field(default_factory=lambda: boto3.client("lambda", region_name=REGION))
    dynamodb: Any = field(default_factory=lambda: boto3.client("dynamodb", region_name=REGION))

    def tables_of_indexable(self) -> dict[str, str]:
        return {schema.name: self.tables[schema.name] for schema in indexable_schemas()}

    # --- what a test breaks ------------------------------------------------------------------------------------
    def disable_mapping(self, table: str) -> None:
        self.lambda_.update_event_source_mapping(UUID=self.poller.mappings[table], Enabled=False)

    def enable_mapping(self, table: str) -> None:
        self.lambda_.update_event_source_mapping(UUID=self.poller.mappings[table], Enabled=True)

    def admin_request(self, method: str, path: str, body: Any = None) -> Any:
        payload = json.dumps(body).encode() if body is not None else None
        response = self.admin.request(method, path, payload)
        assert response.status < 300, (path, response.status, response.body[:500])
        return response.json()

    # --- what is left ------------------------------------------------------------------------------------------
    def canary_items(self) -> list[str]:
        return canary_items(self.dynamodb, self.tables.values())

    def canary_documents(self) -> list[str]:
        return canary_documents(self.server)

    def dead_letters(self) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs", region_name=REGION)
        bodies, handles = [], []
        while batch := sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10).get("Messages", []):
            bodies += [json.loads(m["Body"]) for m in batch]
            handles += [m["ReceiptHandle"] for m in batch]
        for receipt in handles:
            sqs.change_message_visibility(QueueUrl=self.dlq_url, ReceiptHandle=receipt, VisibilityTimeout=0)
        return bodies


def virtual_time(
    poller: Poller, monkeypatch: pytest.MonkeyPatch, engine: EngineNode | None = None
) -> VirtualTime:
    """Hand the smoke run a virtual clock whose sleeps drive `poller` (and refresh `engine`'s indices)."""
    clock = VirtualTime(poller, engine)
    smoke_operation = worker.OPERATIONS["smoke"]
    real_tools = smoke_operation._tools  # type: ignore[attr-defined]

    def tools(env: Any, settings: Any) -> Any:
        return replace(real_tools(env, settings), monotonic=clock.monotonic, sleep=clock.sleep, now=clock.now)

    monkeypatch.setattr(smoke_operation, "_tools", tools)
    return clock


def on_the_clock(stack: SmokeStack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow's Wait states pass on the run's clock (each drives one poll of every mapping, as the smoke run's
    own sleeps do), and each worker invocation's length on it is recorded."""
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function import wait_function

    def wait(_: Any, env: Any, wait_seconds: float) -> None:
        stack.workflow_waits.append(float(wait_seconds))
        stack.clock.sleep(wait_seconds)

    monkeypatch.setattr(wait_function.WaitFunction, "_wait_interval", wait)
    handle = worker.handler

    def timed(event: dict[str, Any], context: Any) -> Any:
        started = stack.clock.monotonic()
        try:
            return handle(event, context)
        finally:
            stack.invocations.append((str(event.get("step")), stack.clock.monotonic() - started))

    monkeypatch.setattr(worker, "handler", timed)


def _invoke_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto runs a function in Docker; the worker runs here instead, its errors shaped as Lambda reports them (the
    error type is what the state machine's Retry and Catch match)."""
    from moto.awslambda.models import LambdaFunction

    def invoke(self: Any, body: str, request_headers: Any, response_headers: Any) -> bytes:
        assert self.function_name == WORKER, f"only the ops worker runs here, not {self.function_name}"
        event = json.loads(body) if body else {}
        try:
            result = worker.handler(event, Context(900))
        except Exception as error:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}).encode()
        return json.dumps(result, default=str).encode()

    monkeypatch.setattr(LambdaFunction, "invoke", invoke)


def _report_processing_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """GetEventSourceMapping answers the last processing result the poller recorded (moto keeps none)."""
    from moto.awslambda.models import EventSourceMapping

    original = EventSourceMapping.get_configuration

    def get_configuration(self: Any) -> dict[str, Any]:
        configuration = dict(original(self))
        result = getattr(self, "last_processing_result", None)
        if result is not None:
            configuration["LastProcessingResult"] = result
        return configuration

    monkeypatch.setattr(EventSourceMapping, "get_configuration", get_configuration)


def _stacks(environment: str, machines: Mapping[str, str]) -> None:
    """The two stacks' outputs, as far as the CLI reads them."""
    placeholder = {"Queue": {"Type": "AWS::SQS::Queue"}}
    unused = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:unused"
    machine_outputs = deployed.STATE_MACHINE_OUTPUTS.items()
    outputs = {name: {"Value": machines.get(operation, unused)} for operation, name in machine_outputs}
    stateless = {"Resources": placeholder, "Outputs": outputs}
    stateful = {"Resources": placeholder, "Outputs": {deployed.BUCKET_OUTPUT: {"Value": OPS_BUCKET}}}
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    for name, template in (("Stateful", stateful), ("Stateless", stateless)):
        cloudformation.create_stack(StackName=f"{environment}-{name}", TemplateBody=json.dumps(template))


def canary_items(dynamodb: Any, tables: Iterable[str]) -> list[str]:
    """Every canary item still in one of the tables."""
    found = []
    for table in sorted(set(tables)):
        for item in dynamodb.scan(TableName=table, ConsistentRead=True)["Items"]:
            if scope_of(item["pk"]["S"]) == CANARY:
                found.append(f"{table}: {item['pk']['S']}#{item['sk']['S']}")
    return found


def canary_documents(server: LoopbackOpenSearch) -> list[str]:
    """Every canary document (tombstones included) in every index of every indexable schema."""
    found = []
    patterns = [indexnames.index_pattern(schema.name) for schema in indexable_schemas()]
    for index in server.index_names():
        if any(fnmatch.fnmatchcase(index, pattern) for pattern in patterns):
            for doc_id, source in server.documents(index).items():
                if scope_of(str(source.get("pk", ""))) == CANARY:
                    found.append(f"{index}: {doc_id}")
    return found


@contextlib.contextmanager
def smoke_stack(
    config: EnvironmentConfig,
    monkeypatch: pytest.MonkeyPatch,
    node: SecuredNode,
    *,
    wait_seconds: float,
    startup_minutes: float = 0.0,
    latency_seconds: float = 0.0,  # each search request's added latency: `make bench` (bench/smoke.py) sets it
) -> Iterator[SmokeStack]:
    from moto.dynamodb.models import dynamodb_backends

    use_fake_aws(monkeypatch, REGION)
    MotoGaps(monkeypatch, Clock())  # a failed part fails its distributed map, as on AWS
    _invoke_in_process(monkeypatch)
    _report_processing_results(monkeypatch)
    admin_arn = config.role_arn(config.platform_role_name("search-admin"))
    sync_arn = config.role_arn(config.platform_role_name("stream-sync"))
    principals = {ADMIN_KEY: admin_arn, SYNC_KEY: sync_arn}
    fgac = FineGrainedAccessControl(
        admin_arn, lambda key: principals.get(key) or moto_role_of_access_key(key)
    )
    # IAM decides each signed request as the synthesized access policy and the roles' policies say
    stateful, stateless = deployed_names(config)
    access = domain_access(stateful, template_policies(stateful, stateless))
    with (
        mock_aws(config={"stepfunctions": {"execute_state_machine": True}}),
        LoopbackOpenSearch(
            region=REGION, fgac=fgac, latency_seconds=latency_seconds, access=access, engine=node
        ) as server,
    ):
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        tables: dict[str, str] = {}
        streams: dict[str, str] = {}
        prefixes: dict[str, tuple[str, ...]] = {}
        for plan in config.source_tables:
            name = table_name(plan.construct_id)
            created = dynamodb.create_table(**single_table(name))["TableDescription"]
            streams[name] = created["LatestStreamArn"]
            prefixes[name] = tuple(f"{schema}::" for schema in plan.indexable_schemas)
            tables |= dict.fromkeys(plan.schemas, name)
        create_bucket(REGION, OPS_BUCKET, GEOMETRY_BUCKET)
        dlq_url = boto3.client("sqs", region_name=REGION).create_queue(QueueName="stream-sync-dlq")[
            "QueueUrl"
        ]

        iam = boto3.client("iam", region_name=REGION)
        role = iam.create_role(RoleName="lambda", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        lambda_ = boto3.client("lambda", region_name=REGION)
        code = dict(Runtime="python3.12", Role=role, Handler="index.handler", Code={"ZipFile": EMPTY_ZIP})
        made = [lambda_.create_function(FunctionName=name, **code) for name in (WORKER, SYNC)]
        functions = {function["FunctionName"]: function["FunctionArn"] for function in made}
        mappings = {}
        for name, arn in streams.items():
            mapping = lambda_.create_event_source_mapping(
                EventSourceArn=arn, FunctionName=SYNC, StartingPosition="TRIM_HORIZON", Enabled=True
            )
            mappings[name] = mapping["UUID"]
            # the poller delivers records, not moto (which would run the function in Docker)
            dynamodb_backends[ACCOUNT][REGION].get_table(name).lambda_event_source_mappings.clear()

        probes = {
            role.name: config.role_arn(config.search.probe_role_name(role.name))
            for role in config.search.read_roles
        }
        admin = OpenSearchTransport(
            server.endpoint, REGION, timeout_seconds=5, credentials=Credentials(ADMIN_KEY, "secret")
        )
        setup: dict[str, Any] = {
            "schemas": [schema.name for schema in indexable_schemas()],
            "replicas": 0,
            "sync_role_arn": sync_arn,
            "read_roles": read_role_definitions(
                (role.name, role.schemas, (*role.mapped_backend_roles, probes[role.name]))
                for role in config.search.read_roles
            ),
        }
        node.prepared(
            f"IndexBootstrap.run {setup!r}",
            lambda: IndexBootstrap(admin, sleep=lambda seconds: None).run(**setup),
        )

        machine_name = state_machine_name(config.search.domain_name, "smoke")
        targets = Targets(
            worker_arn=functions[WORKER],
            ops_bucket=OPS_BUCKET,
            key_arn=f"arn:aws:kms:{REGION}:{ACCOUNT}:key/data",
            partition="aws",
            max_concurrency=config.ops.max_concurrency,
        )
        machine = boto3.client("stepfunctions", region_name=REGION).create_state_machine(
            name=machine_name, definition=json.dumps(definition("smoke", targets)), roleArn=role
        )["stateMachineArn"]
        _stacks(config.name, {"smoke": machine})

        for variable, value in {
            # the worker's (infra/constructs/ops_workflows.py, smoke.py) and the sync's (stream_sync.py, heartbeat.py)
            "AWS_ACCESS_KEY_ID": SYNC_KEY,  # the functions' own roles: only the sync's is mapped in FGAC
            "AWS_REGION": REGION,
            "SCHEMA_TABLES": json.dumps(tables),
            "OPENSEARCH_ENDPOINT": server.endpoint,
            "ADMIN_ROLE_ARN": admin_arn,
            "OPS_BUCKET": OPS_BUCKET,
            "GEOMETRY_BUCKET": GEOMETRY_BUCKET,
            "DLQ_URL": dlq_url,
            "BULK_MAX_BYTES": str(2 * 1024 * 1024),
            "REQUEST_TIMEOUT_SECONDS": "10",  # never reached on loopback, however loaded the machine
            "SCAN_SEGMENTS": "2",
            "EXPORT_ABOVE_BYTES": str(10 * 2**30),
            "TOMBSTONE_MIN_AGE_SECONDS": str(16 * 86400),
            "EVENT_SOURCE_MAPPINGS": json.dumps(mappings),
            "SMOKE_READERS": json.dumps(
                [
                    {"name": role.name, "schemas": list(role.schemas), "probeRoleArn": probes[role.name]}
                    for role in config.search.read_roles
                ]
            ),
            "SMOKE_WAIT_SECONDS": str(wait_seconds),
            "SMOKE_STARTUP_MINUTES": str(startup_minutes),
            "SMOKE_POLL_SECONDS": "0.5",  # virtual: a failing wait of 5 s is ten polls
            "ENVIRONMENT_NAME": config.name,
            "BULK_MAX_ATTEMPTS": "2",
            "RETRY_BASE_SECONDS": "0.001",
            "RETRY_MAX_SECONDS": "0.002",
            "DEADLINE_MARGIN_SECONDS": "0",
        }.items():
            monkeypatch.setenv(variable, value)
        monkeypatch.setattr(deployed, "pause", follow)
        handler.reset()
        poller = Poller(streams, prefixes, mappings)
        poller.capture(monkeypatch)
        clock = virtual_time(poller, monkeypatch, node)
        stack = SmokeStack(config, server, poller, clock, tables, probes, admin, dlq_url)
        on_the_clock(stack, monkeypatch)
        before = set(threading.enumerate())
        try:
            yield stack
        finally:
            report_decisions(server.access, config.name)
            settle(before)  # a failed canary's map children can outlive the run, as in the workflow tests
            admin.close()
            handler.reset()
