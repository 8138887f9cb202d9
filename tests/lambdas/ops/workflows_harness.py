"""The ops workflows as deployed, executed: an environment's synthesized templates stood up in moto, its four
state machines created from their synthesized definitions and executed by moto's States Language interpreter
(`mock_aws(config={"stepfunctions": {"execute_state_machine": True}})`), every Lambda task running the worker
in-process with the environment the template gives it, started and followed by the laptop CLI, and every AWS
call the worker and the state machines make checked against their synthesized policies (tests/support/iam.py).

What the test world supplies, because nothing in a template can: the loopback OpenSearch server's endpoint
instead of the domain's, a clock for the interpreter's waits and retry backoff (they are recorded, not slept),
and patches for what moto's interpreter lacks (`MotoGaps`: each has a test that fails once moto has it).
"""

from __future__ import annotations

import functools
import gzip
import importlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.config import EnvironmentConfig
from ops import cli, deployed, worker
from tests.support.aws import (
    EMPTY_ZIP,
    Context,
    create_bucket,
    moto_role_of_access_key,
    parsed_definitions,
    single_table,
    use_fake_aws,
)
from tests.support.cfn import Resolver, synthesized
from tests.support.iam import DomainAccess, Policies, SdkCalls
from tests.support.opensearch_server import FineGrainedAccessControl, LoopbackOpenSearch
from tests.support.secured_node import SecuredNode

WORKER_HANDLER = "ops.worker.handler"
SYNC_HANDLER = "stream_sync.handler.handler"
STATE_MACHINE = "AWS::StepFunctions::StateMachine"
MAX_INVOCATIONS = 300  # far more than any run here needs


@dataclass
class Clock:
    """The interpreter's sleeps (Wait states, retry backoff), recorded instead of slept."""

    waited: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waited.append(float(seconds))

    def time(self) -> float:
        return time.time() + sum(self.waited)


def asl(module: str) -> Any:
    """A module of moto's States Language interpreter, imported when a patch first needs it."""
    return importlib.import_module(f"moto.stepfunctions.parser.asl.{module}")


def states_error(name: str) -> Any:
    """The `States.*` error `name` (a `StatesErrorNameType` member), as moto's interpreter names it."""
    errors = asl("component.common.error_name.states_error_name")
    kind = asl("component.common.error_name.states_error_name_type").StatesErrorNameType
    return errors.StatesErrorName(typ=getattr(kind, name))


def map_run_failed(env: Any, name: Any, cause: str) -> Any:
    """The failure a map run ends with (`MapRunFailed` with the error's name and cause), as moto's interpreter raises it."""
    from moto.stepfunctions.parser.api import HistoryEventType, MapRunFailedEventDetails

    failures = asl("component.common.error_name.failure_event")
    details = MapRunFailedEventDetails(error=name.error_name, cause=cause)
    return failures.FailureEventException(
        failure_event=failures.FailureEvent(
            env=env,
            error_name=name,
            event_type=HistoryEventType.MapRunFailed,
            event_details=asl("eval.event.event_detail").EventDetails(mapRunFailedEventDetails=details),
        )
    )


class MotoGaps:
    """What moto 5.2.5's interpreter and DynamoDB lack that AWS documents, patched for the tests only:

    - the `JSONL` ItemReader input type (AWS accepts CSV, JSON, JSONL, PARQUET, MANIFEST) is refused at
      CreateStateMachine: read it as JSON Lines;
    - SDK-integration results keep Python datetimes (States.JsonToString, the Lambda payload and DescribeExecution
      then raise TypeError): they become ISO 8601 strings, as JSON can carry them;
    - a Fail state whose execution is stopped between its `ErrorPath` and its `CausePath` fails with its whole
      input as the cause (moto pops a value the skipped expression never pushed): the state runs whole or not;
    - a distributed map whose child execution failed succeeds anyway (its failed items are only counted): on AWS
      the default tolerated failure (0) fails the map with States.ExceedToleratedFailureThreshold;
    - a child still running when its map run fails is aborted on AWS; moto stops its frame mid-state, and its next
      Task state fails it with an error of moto's own (it pops what its skipped Resource never pushed): such a
      child is counted as aborted, not failed;
    - ExportTableToPointInTime writes one data file and no manifest, names the export `.../import/...`, and its
      description has no `ExportManifest` or `ExportTime`: the export is written as DynamoDB writes it (data files
      under `data/`, `manifest-files.json` as JSON Lines, `manifest-summary.json`; `export_files` of them);
    - a distributed map's results count against the 256 KiB payload quota (`PAYLOAD_QUOTA`, "Step Functions
      service quotas") only as part of the state's output, after its `ResultSelector`: on AWS the results
      themselves do, as a task's result does before its `ResultSelector`, and results over it fail the state with
      `States.DataLimitExceeded`, a terminal error `States.ALL` does not catch ("Handling errors in Step
      Functions workflows"; moto's catch-all catches it); only a `ResultWriter` keeps them out of the state;
    - a `ResultWriter` writes a manifest that lists no result files, and no result files: it writes
      `<Prefix>/<map run id>/SUCCEEDED_0.json` (each child's output, `Status` and `OutputDetails`, a subset of the
      fields AWS writes) and the manifest listing it ("ResultWriter (Map)"), as the state machine's role."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, clock: Clock) -> None:
        self.export_failure: tuple[str, str] | None = None
        self.export_files = 2  # data files an export writes (its items split among them; some may be empty)
        # (error, cause) of each distributed map child that failed: moto keeps no child execution to describe.
        self.failed_children: list[tuple[str, str]] = []
        parsed_definitions(monkeypatch)  # not a gap: each definition's syntax tree made once, for speed
        from moto.dynamodb.models import table_export

        reader = "component.state.exec.state_map.item_reader"
        item_reader_decl = asl(f"{reader}.item_reader_decl")
        transformer_json = asl(f"{reader}.eval.resource_output_transformer.transformer_json")
        input_type = asl(f"{reader}.reader_config.input_type")
        aws_sdk = asl("component.state.exec.state_task.service.state_task_service_aws_sdk")
        original_init = input_type.InputType.__init__

        def accept_jsonl(self: Any, input_type: str) -> None:
            original_init(self, "JSON" if input_type == "JSONL" else input_type)
            self.jsonl = input_type == "JSONL"

        monkeypatch.setattr(input_type.InputType, "__init__", accept_jsonl)
        original_factory = item_reader_decl.resource_output_transformer_for

        class JsonLines(transformer_json.ResourceOutputTransformerJson):
            def _eval_body(self, env: Any) -> None:
                config = env.stack.pop()
                text = env.stack.pop()
                env.stack.append(json.dumps([json.loads(line) for line in text.splitlines() if line.strip()]))
                env.stack.append(config)
                super()._eval_body(env)

        def transformer(input_type: Any) -> Any:
            jsonl = getattr(input_type, "jsonl", False)
            return JsonLines() if jsonl else original_factory(input_type=input_type)

        monkeypatch.setattr(item_reader_decl, "resource_output_transformer_for", transformer)

        original_task = aws_sdk.StateTaskServiceAwsSdk._eval_service_task

        def plain_json(self: Any, env: Any, *args: Any, **kwargs: Any) -> None:
            original_task(self, env, *args, **kwargs)
            env.stack.append(_without_datetimes(env.stack.pop()))

        monkeypatch.setattr(aws_sdk.StateTaskServiceAwsSdk, "_eval_service_task", plain_json)
        from moto.stepfunctions.parser.asl.eval.program_state import ProgramError, ProgramStopped

        iteration = "component.state.exec.state_map.iteration"
        distributed = asl(f"{iteration}.itemprocessor.distributed_item_processor_worker")
        original_job = distributed.DistributedItemProcessorWorker._eval_job
        gaps = self

        failed_runs: list[Any] = []  # the records of the map runs a child's failure has failed
        lock = threading.Lock()

        def failing_job(self: Any, env: Any, job: Any) -> None:
            # This job's own outcome, from its own frame: a job that neither succeeded (its output is its child's
            # result) nor was stopped failed or timed out. (Reading the map run's shared failure counter before
            # and after raced with the other jobs running at once: a job that succeeded while another failed was
            # counted as failed.) A child still running when its map run fails is aborted, as on AWS: in moto
            # its frame stops, its next Task state pops a value the skipped Resource never pushed, and it "fails"
            # with "'dict' object has no attribute 'region'" (about one run in 20 with two parts failing at once).
            original_job(self, env, job)
            ended = env.program_state()
            with lock:
                if any(record is self._map_run_record for record in failed_runs):
                    return
                if isinstance(ended, ProgramError):
                    details = ended.error or {}
                    gaps.failed_children.append((str(details.get("error")), str(details.get("cause"))))
                if job.job_output is None and not isinstance(ended, ProgramStopped):
                    failed_runs.append(self._map_run_record)
                    name = states_error("StatesExceedToleratedFailureThreshold")
                    cause = "The specified tolerated failure threshold was exceeded"
                    job.job_output = map_run_failed(env, name, cause)

        monkeypatch.setattr(distributed.DistributedItemProcessorWorker, "_eval_job", failing_job)
        StateFail = asl("component.state.fail.state_fail").StateFail
        original_fail = StateFail._eval_state

        def atomic_fail(self: Any, env: Any) -> None:
            # A Fail state's error and cause both come from its input. moto skips an expression's evaluation once
            # the execution stopped and pops the stack anyway: a child stopped between the two (its map run
            # failing on a sibling's error) failed with its whole input as the cause.
            with env._state_mutex:
                if env.is_running():
                    original_fail(self, env)

        monkeypatch.setattr(StateFail, "_eval_state", atomic_fail)
        monkeypatch.setattr(asl("component.common.retry.retrier_decl"), "time", clock)
        wait_function = asl("component.state.wait.wait_function.wait_function").WaitFunction
        monkeypatch.setattr(
            wait_function, "_wait_interval", lambda self, env, wait_seconds: clock.sleep(wait_seconds)
        )

        def write_export(export: Any, s3_backend: Any) -> None:
            if gaps.export_failure is not None:
                export.status = "FAILED"
                export.failure_code, export.failure_message = gaps.export_failure
                return
            base = f"{export.s3_prefix}/AWSDynamoDB/{export.export_id}"
            put = functools.partial(s3_backend.put_object, export.s3_bucket)
            items = [item.to_json(root_attr_name="Item") for item in export.table.all_items()]
            count = gaps.export_files
            halves = [items[number::count] for number in range(count)]
            lines = []
            for number, half in enumerate(halves):
                key = f"{base}/data/{uuid.uuid4().hex}{number}.json.gz"
                body = "".join(json.dumps(item) + "\n" for item in half).encode()
                put(key, gzip.compress(body))
                lines.append({"itemCount": len(half), "md5Checksum": "-", "etag": "-", "dataFileS3Key": key})
            files = f"{base}/manifest-files.json"
            put(files, "".join(json.dumps(x) + "\n" for x in lines).encode())
            summary = {
                "version": "2020-06-30",
                "exportArn": export.arn,
                "exportTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "itemCount": len(items),
                "manifestFilesS3Key": files,
                "outputFormat": "DYNAMODB_JSON",
            }
            put(f"{base}/manifest-summary.json", json.dumps(summary).encode())
            export.item_count = len(items)
            export.manifest = f"{base}/manifest-summary.json"
            export.status = "COMPLETED"

        original_response = table_export.TableExport.response

        def response(export: Any) -> dict[str, Any]:
            answer = dict(original_response(export))
            if getattr(export, "manifest", None):
                answer |= {"ExportManifest": export.manifest, "ExportTime": datetime.now(UTC)}
            return {key: value for key, value in answer.items() if value is not None}

        original_export = table_export.TableExport.__init__

        def export_named_as_dynamodb_names_it(export: Any, *args: Any, **kwargs: Any) -> None:
            original_export(export, *args, **kwargs)
            export.export_id = f"{int(time.time() * 1000):014d}-{uuid.uuid4().hex[:8]}"
            export.arn = f"{export.table.table_arn}/export/{export.export_id}"

        monkeypatch.setattr(table_export.TableExport, "__init__", export_named_as_dynamodb_names_it)
        monkeypatch.setattr(table_export.TableExport, "_backup_to_s3_file", write_export)
        monkeypatch.setattr(table_export.TableExport, "response", response)
        self._map_results(monkeypatch)

    @staticmethod
    def _map_results(monkeypatch: pytest.MonkeyPatch) -> None:
        """A distributed map's results: over `PAYLOAD_QUOTA` in the state, `States.DataLimitExceeded` (terminal);
        with a `ResultWriter`, the result files and their manifest in S3."""
        error_equals_decl = asl("component.common.error_name.error_equals_decl")
        state_map = asl("component.state.exec.state_map.state_map")
        distributed = asl("component.state.exec.state_map.iteration.distributed_iteration_component")
        resource_eval_s3 = asl("component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3")
        limit = states_error("StatesStatesDataLimitExceeded")
        original_props = state_map.StateMap.from_state_props

        def note_the_writer(state: Any, props: Any) -> None:
            original_props(state, props)
            state.iteration_component.results_in_state = state.result_writer is None

        monkeypatch.setattr(state_map.StateMap, "from_state_props", note_the_writer)
        original_run = distributed.DistributedIterationComponent._eval_body

        def within_quota(component: Any, env: Any) -> None:
            original_run(component, env)  # the map run's results on the stack
            if not getattr(component, "results_in_state", False):
                return
            size = payload_bytes(env.stack[-1])
            if size > PAYLOAD_QUOTA:
                cause = "The state/task returned a result with a size exceeding the maximum number of bytes service"
                raise map_run_failed(env, limit, f"{cause} limit: {size} > {PAYLOAD_QUOTA}")

        monkeypatch.setattr(distributed.DistributedIterationComponent, "_eval_body", within_quota)
        original_equals = error_equals_decl.ErrorEqualsDecl._eval_body

        def terminal(declared: Any, env: Any) -> None:
            error = env.stack[-1]
            named = {name.error_name for name in declared.error_names}
            if error == limit and limit.error_name not in named:  # not even by States.ALL
                env.stack.pop()
                env.stack.append(False)
                return
            original_equals(declared, env)

        monkeypatch.setattr(error_equals_decl.ErrorEqualsDecl, "_eval_body", terminal)
        s3_writer = resource_eval_s3.ResourceEvalS3

        def put_results(env: Any, runtime: Any, credentials: Any) -> None:
            parameters = env.stack.pop()
            results = env.stack.pop()
            s3 = s3_writer._get_s3_client(resource_runtime_part=runtime, state_credentials=credentials)
            map_run_arn = env.map_run_record_pool_manager.get_all()[-1].map_run_arn
            bucket, prefix = parameters["Bucket"], str(parameters.get("Prefix", ""))
            base = f"{prefix.rstrip('/')}/{map_run_arn.rsplit(':', 1)[1]}/".lstrip("/")
            succeeded = [
                {"Output": json.dumps(output), "OutputDetails": {"Included": True}, "Status": "SUCCEEDED"}
                for output in results
            ]
            files = []
            if succeeded:
                body = json.dumps(succeeded).encode()
                s3.put_object(Bucket=bucket, Key=f"{base}SUCCEEDED_0.json", Body=body)
                files.append({"Key": f"{base}SUCCEEDED_0.json", "Size": len(body)})
            listed = {"FAILED": [], "PENDING": [], "SUCCEEDED": files}
            manifest = {"DestinationBucket": bucket, "MapRunArn": map_run_arn, "ResultFiles": listed}
            s3.put_object(Bucket=bucket, Key=f"{base}manifest.json", Body=json.dumps(manifest).encode())
            written = {"Bucket": bucket, "Key": f"{base}manifest.json"}
            env.stack.append({"MapRunArn": map_run_arn, "ResultWriterDetails": written})

        monkeypatch.setattr(s3_writer, "_handle_put_object", staticmethod(put_results))


# bytes of a state's input or output, as UTF-8 JSON ("Step Functions service quotas")
PAYLOAD_QUOTA = 256 * 1024


def payload_bytes(value: Any) -> int:
    """A payload's size as Step Functions counts it: its JSON text, UTF-8 encoded."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _without_datetimes(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _without_datetimes(member) for key, member in value.items()}
    if isinstance(value, list):
        return [_without_datetimes(member) for member in value]
    return value


class World:
    """One environment's stacks in moto: what the workflows touch is real moto state (tables, buckets, the key,
    queues, the worker function, the state machines); everything else binds to a placeholder."""

    def __init__(self, config: EnvironmentConfig, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.config = config
        self.account, self.region = config.account, config.region
        templates = synthesized()[config.name]
        self.stateful_template, self.stateless_template = templates["Stateful"], templates["Stateless"]
        self.endpoint = endpoint
        self.monkeypatch = monkeypatch
        self.names: dict[str, dict[str | None, Any]] = {}
        named = {"account": self.account, "region": self.region, "bind": self._bind}
        self.stateful = Resolver(self.stateful_template, parameters={}, **named)
        self._create_stateful()
        self.stateless = Resolver(self.stateless_template, parameters=ssm_parameters(self.stateful), **named)
        self._create_stateless()
        self.policies = template_policies(self.stateful, self.stateless)

    # --- binding logical ids to what was made -----------------------------------------------------------------------

    def _bind(self, logical_id: str, attribute: str | None) -> Any:
        return self.names.get(logical_id, {}).get(attribute, f"unbound:{logical_id}.{attribute or 'Ref'}")

    def _made(self, logical_id: str, **values: Any) -> None:
        made = self.names.setdefault(logical_id, {})
        made.update({None if k == "Ref" else k: v for k, v in values.items()})

    def _made_roles(self, resolver: Resolver) -> None:
        for logical_id, resource in resolver.resources("AWS::IAM::Role").items():
            name = resource["Properties"].get("RoleName", logical_id)
            self._made(logical_id, Ref=name, Arn=f"arn:aws:iam::{self.account}:role/{name}")

    def _function(self, logical_id: str, name: str, role: str, handler: str) -> None:
        """A function in moto that the test runs in-process (its code never runs: moto would start Docker)."""
        function = boto3.client("lambda", region_name=self.region).create_function(
            FunctionName=name, Runtime="python3.12", Role=role, Handler=handler, Code={"ZipFile": EMPTY_ZIP}
        )
        self._made(logical_id, Ref=name, Arn=function["FunctionArn"])

    def _create_stateful(self) -> None:
        kms = boto3.client("kms", region_name=self.region)
        for logical_id in self.stateful.resources("AWS::KMS::Key"):
            arn = kms.create_key()["KeyMetadata"]["Arn"]
            self._made(logical_id, Ref=arn.rsplit("/", 1)[1], Arn=arn)
        dynamodb = boto3.client("dynamodb", region_name=self.region)
        for logical_id in self.stateful.resources("AWS::DynamoDB::Table"):
            name = f"{self.config.name}-{logical_id[:-8].lower()}"
            table = dynamodb.create_table(**single_table(name))["TableDescription"]
            dynamodb.update_continuous_backups(  # as the template sets it (exports need it)
                TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
            )
            self._made(logical_id, Ref=name, Arn=table["TableArn"], StreamArn=table["LatestStreamArn"])
        for logical_id in self.stateful.resources("AWS::S3::Bucket"):
            name = f"{self.config.name}-{logical_id.lower()}"[:63]
            create_bucket(self.region, name)
            self._made(logical_id, Ref=name, Arn=f"arn:aws:s3:::{name}")
        self._made_roles(self.stateful)
        for logical_id in self.stateful.resources("AWS::IAM::ManagedPolicy"):  # no path: CDK sets "/"
            self._made(logical_id, Ref=f"arn:aws:iam::{self.account}:policy/{logical_id}")
        for logical_id, resource in self.stateful.resources("AWS::OpenSearchService::Domain").items():
            arn = f"arn:aws:es:{self.region}:{self.account}:domain/{resource['Properties']['DomainName']}"
            self._made(logical_id, DomainEndpoint=self.endpoint.split("://", 1)[1], Arn=arn, DomainArn=arn)

    def _create_stateless(self) -> None:
        sqs = boto3.client("sqs", region_name=self.region)
        for logical_id in self.stateless.resources("AWS::SQS::Queue"):
            url = sqs.create_queue(QueueName=logical_id)["QueueUrl"]
            arn = f"arn:aws:sqs:{self.region}:{self.account}:{logical_id}"
            self._made(logical_id, Ref=url, Arn=arn, QueueName=logical_id)
        self._made_roles(self.stateless)
        for logical_id in self.stateless.resources("AWS::Logs::LogGroup"):
            self._made(logical_id, Arn=f"arn:aws:logs:{self.region}:{self.account}:log-group:{logical_id}:*")
        functions = self.stateless.resources("AWS::Lambda::Function").items()
        handlers = {resource["Properties"]["Handler"]: logical_id for logical_id, resource in functions}
        iam = boto3.client("iam", region_name=self.region)
        trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}}]}
        role = iam.create_role(RoleName="ops-worker-in-moto", AssumeRolePolicyDocument=json.dumps(trust))
        self._function(handlers[WORKER_HANDLER], "ops-worker", role["Role"]["Arn"], WORKER_HANDLER)
        if SYNC_HANDLER in handlers:
            self._function(handlers[SYNC_HANDLER], "stream-sync", role["Role"]["Arn"], SYNC_HANDLER)
        self._create_mappings()
        self.worker_role, self.worker_environment = self.function(WORKER_HANDLER)
        self.state_machines: dict[str, str] = {}
        self.machine_roles: dict[str, str] = {}
        self._definitions: dict[str, tuple[str, str]] = {}  # operation -> its machine's name and definition
        for logical_id, resource in self.stateless.resources(STATE_MACHINE).items():
            properties = resource["Properties"]
            text = json.dumps(properties["Definition"])
            for name, value in self.stateless(properties.get("DefinitionSubstitutions", {})).items():
                text = text.replace(f"${{{name}}}", str(value))
            name = properties["StateMachineName"]
            operation = name.rsplit("-", 1)[1]
            arn = f"arn:aws:states:{self.region}:{self.account}:stateMachine:{name}"
            self.state_machines[operation] = arn
            self.machine_roles[operation] = self.stateless(properties["RoleArn"])
            self._definitions[operation] = (name, text)
            self._made(logical_id, Ref=arn, Name=name)
        self._outputs()

    def machine(self, operation: str) -> str:
        """The operation's state machine, made in moto when a test first runs it: a test runs one or two of the five,
        and moto parses a definition as it makes it (two thirds of a world's making, all five made each time)."""
        if operation in self._definitions:
            name, text = self._definitions.pop(operation)
            sfn = boto3.client("stepfunctions", region_name=self.region)
            made = sfn.create_state_machine(name=name, definition=text, roleArn=self.machine_roles[operation])
            assert made["stateMachineArn"] == self.state_machines[operation], made
        return self.state_machines[operation]

    def _create_mappings(self) -> None:
        """The stream sync's event source mappings (the smoke run reads their state; the test plays Lambda's
        poller, so moto's own delivery, which would run the function in Docker, is switched off)."""
        from moto.dynamodb.models import dynamodb_backends

        lambda_ = boto3.client("lambda", region_name=self.region)
        self.mappings: dict[str, str] = {}  # table name -> mapping UUID
        for logical_id, resource in self.stateless.resources("AWS::Lambda::EventSourceMapping").items():
            stream = str(self.stateless(resource["Properties"]["EventSourceArn"]))
            uuid = lambda_.create_event_source_mapping(
                EventSourceArn=stream,
                FunctionName="stream-sync",
                StartingPosition="TRIM_HORIZON",
                Enabled=True,
            )["UUID"]
            self._made(logical_id, Ref=uuid)
            table = stream.split("/")[1]
            self.mappings[table] = uuid
            dynamodb_backends[self.account][self.region].get_table(table).lambda_event_source_mappings.clear()

    def _outputs(self) -> None:
        """The stacks' outputs, as the CLI finds them (moto CloudFormation stacks that hold only outputs)."""
        cloudformation = boto3.client("cloudformation", region_name=self.region)
        read = {*deployed.STATE_MACHINE_OUTPUTS.values(), deployed.BUCKET_OUTPUT}
        for kind, resolver in (("Stateful", self.stateful), ("Stateless", self.stateless)):
            outputs = resolver.template.get("Outputs", {}).items()
            values = {
                name: {"Value": str(resolver(output["Value"]))} for name, output in outputs if name in read
            }
            template = {"Resources": {"Nothing": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
            body = json.dumps(template | {"Outputs": values})
            cloudformation.create_stack(StackName=f"{self.config.name}-{kind}", TemplateBody=body)

    # --- the policies that decide -------------------------------------------------------------------------------

    def domain_access(self) -> DomainAccess:
        return domain_access(self.stateful, self.policies)

    # --- what the deployed stack gives its functions ---------------------------------------------------------------

    def function(self, handler: str) -> tuple[str, dict[str, str]]:
        """(role ARN, environment) of the stateless stack's function with `handler`, as its template sets them
        (the loopback server standing for the domain; no VPC endpoint's DNS name: moto serves the regional one)."""
        (resource,) = [
            r
            for r in self.stateless.resources("AWS::Lambda::Function").values()
            if r["Properties"]["Handler"] == handler
        ]
        variables = dict(self.stateless(resource["Properties"].get("Environment", {}).get("Variables", {})))
        variables.pop("DYNAMODB_STREAMS_ENDPOINT", None)
        if "OPENSEARCH_ENDPOINT" in variables:  # the loopback server stands for the domain
            variables["OPENSEARCH_ENDPOINT"] = self.endpoint
        return str(self.stateless(resource["Properties"]["Role"])), {**variables, "AWS_REGION": self.region}

    def custom_resource(self, kind: str) -> dict[str, Any]:
        """The resolved properties of the stateless stack's custom resource of type `kind`."""
        (resource,) = self.stateless.resources(kind).values()
        return dict(self.stateless(resource["Properties"]))

    # --- what the deployed stack gives the workflows -------------------------------------------------------------

    @property
    def ops_bucket(self) -> str:
        return str(self.worker_environment["OPS_BUCKET"])

    def table_of(self, schema: str) -> str:
        return str(json.loads(self.worker_environment["SCHEMA_TABLES"])[schema])


def template_policies(stateful: Resolver, stateless: Resolver) -> Policies:
    """The policies the two stacks define, resolved: roles' identity and trust policies, bucket and queue policies,
    key policies, and which key encrypts each bucket, queue and table."""
    account, region = stateful.account, stateful.region
    policies = Policies()
    for resolver in (stateful, stateless):

        def arn(logical_id: str, resolver: Resolver = resolver) -> Any:
            return resolver({"Fn::GetAtt": [logical_id, "Arn"]})

        for kind in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            for resource in resolver.resources(kind).values():
                document = resolver(resource["Properties"]["PolicyDocument"])
                for role in resolver(resource["Properties"].get("Roles", [])):
                    role_arn = role if str(role).startswith("arn:") else f"arn:aws:iam::{account}:role/{role}"
                    policies.identity.setdefault(role_arn, []).append(document)
        for logical_id, resource in resolver.resources("AWS::IAM::Role").items():
            policies.trust[arn(logical_id)] = resolver(resource["Properties"]["AssumeRolePolicyDocument"])
        for logical_id, resource in resolver.resources("AWS::DynamoDB::Table").items():
            key = resource["Properties"].get("SSESpecification", {}).get("KMSMasterKeyId")
            if key:
                policies.table_keys[arn(logical_id)] = resolver(key)
        for resource in resolver.resources("AWS::S3::BucketPolicy").values():
            bucket = resolver(resource["Properties"]["Bucket"])
            policies.buckets[bucket] = resolver(resource["Properties"]["PolicyDocument"])
        for logical_id, resource in resolver.resources("AWS::S3::Bucket").items():
            encryption = resource["Properties"].get("BucketEncryption", {})
            for rule in encryption.get("ServerSideEncryptionConfiguration", []):
                key = rule["ServerSideEncryptionByDefault"].get("KMSMasterKeyID")
                if key:
                    policies.bucket_keys[resolver({"Ref": logical_id})] = resolver(key)
        for logical_id, resource in resolver.resources("AWS::KMS::Key").items():
            policies.key_policies[arn(logical_id)] = resolver(resource["Properties"]["KeyPolicy"])
        for logical_id, resource in resolver.resources("AWS::SQS::Queue").items():
            if "KmsMasterKeyId" in resource["Properties"]:
                policies.queue_keys[arn(logical_id)] = resolver(resource["Properties"]["KmsMasterKeyId"])
        for resource in resolver.resources("AWS::SQS::QueuePolicy").values():
            document = resolver(resource["Properties"]["PolicyDocument"])
            for url in resolver(resource["Properties"]["Queues"]):
                name = str(url).rsplit("/", 1)[-1]
                policies.queues[f"arn:aws:sqs:{region}:{account}:{name}"] = document
    return policies


def domain_access(stateful: Resolver, policies: Policies) -> DomainAccess:
    """IAM's decisions on signed requests to the domain: its access policy, the roles' identity policies."""
    ((logical_id, resource),) = stateful.resources("AWS::OpenSearchService::Domain").items()
    return DomainAccess(
        stateful({"Fn::GetAtt": [logical_id, "Arn"]}),
        stateful(resource["Properties"]["AccessPolicies"]),
        lambda role: policies.identity.get(role, []),
    )


def deployed_names(config: EnvironmentConfig) -> tuple[Resolver, Resolver]:
    """The two stacks' templates resolved by names alone, for a world that makes its own resources: roles bind to
    their ARNs and the domain to its ARN (both follow from names config sets); anything else is unbound."""
    templates = synthesized()[config.name]

    def resolver(stack: str, parameters: dict[str, Any]) -> Resolver:
        template = templates[stack]

        def bind(logical_id: str, attribute: str | None) -> Any:
            resource = template["Resources"].get(logical_id, {})
            properties = resource.get("Properties", {})
            if resource.get("Type") == "AWS::IAM::Role":
                name = properties.get("RoleName", logical_id)
                return f"arn:aws:iam::{config.account}:role/{name}" if attribute == "Arn" else name
            if resource.get("Type") == "AWS::OpenSearchService::Domain" and attribute in ("Arn", "DomainArn"):
                return f"arn:aws:es:{config.region}:{config.account}:domain/{properties['DomainName']}"
            return f"unbound:{logical_id}.{attribute or 'Ref'}"

        return Resolver(
            template, parameters=parameters, bind=bind, account=config.account, region=config.region
        )

    stateful = resolver("Stateful", {})
    return stateful, resolver("Stateless", ssm_parameters(stateful))


def ssm_parameters(stateful: Resolver) -> dict[str, Any]:
    """The SSM parameters the stateful stack writes and the stateless stack reads, by name."""
    return {
        stateful(resource["Properties"]["Name"]): stateful(resource["Properties"]["Value"])
        for resource in stateful.resources("AWS::SSM::Parameter").values()
    }


def run_as(world: World, calls: SdkCalls, handler: str, monkeypatch: pytest.MonkeyPatch, call: Any) -> Any:
    """`call()` as the stateless stack's function with `handler`: its role, its environment."""
    role, environment = world.function(handler)
    with monkeypatch.context() as scoped:
        for name, value in environment.items():
            scoped.setenv(name, str(value))
        with calls.acting(role):
            return call()


def bootstrap(world: World, calls: SdkCalls, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The index bootstrap's Create, as CloudFormation sends it, run as its function."""
    from index_bootstrap import handler as bootstrap_handler

    properties = world.custom_resource("Custom::OpenSearchIndexBootstrap") | {"Endpoint": world.endpoint}
    event = {"RequestType": "Create", "ResourceProperties": properties}
    return dict(
        run_as(
            world,
            calls,
            "index_bootstrap.handler.on_event",
            monkeypatch,
            lambda: bootstrap_handler.on_event(event, Context(120)),
        )
    )


def bootstrapped(
    world: World, calls: SdkCalls, monkeypatch: pytest.MonkeyPatch, server: LoopbackOpenSearch
) -> None:
    """`bootstrap`, or what it made for the test before when nothing it depends on differs (`EngineNode.prepared`):
    the custom resource's properties and its function's role and environment."""
    properties = world.custom_resource("Custom::OpenSearchIndexBootstrap")
    properties.pop("Endpoint", None)  # each test's front has its own port
    role, environment = world.function("index_bootstrap.handler.on_event")
    environment.pop("OPENSEARCH_ENDPOINT", None)
    key = ["Custom::OpenSearchIndexBootstrap", properties, role, environment]
    made = json.dumps(key, sort_keys=True, default=str)
    server.engine.prepared(made, lambda: bootstrap(world, calls, monkeypatch))


@dataclass
class Run:
    status: int
    summary: dict[str, Any]
    execution: dict[str, Any]
    history: list[dict[str, Any]]

    def states_entered(self) -> list[str]:
        entered = "stateEnteredEventDetails"
        return [event[entered]["name"] for event in self.history if entered in event]


class Workflows:
    """Start a workflow with the CLI and wait for its end, the worker running in-process on every Lambda task."""

    def __init__(self, world: World, calls: SdkCalls, clock: Clock, gaps: MotoGaps) -> None:
        self.world, self.calls, self.clock, self.gaps = world, calls, clock, gaps
        self.invocations: list[dict[str, Any]] = []
        self.errors: list[str] = []  # what the worker raised, invocation by invocation
        self.remaining_seconds = 900.0  # of each invocation; lower it to make every part stop at its deadline
        from moto.awslambda.models import LambdaFunction

        workflows = self
        # The worker's environment variables, for the whole test: a distributed map invokes the worker from several
        # threads at once, and setting and restoring them per invocation let one thread's restore delete them
        # under another (`KeyError: 'BULK_MAX_BYTES'`). The test's monkeypatch restores them when it ends.
        for name, value in world.worker_environment.items():
            world.monkeypatch.setenv(name, str(value))

        def invoke(function: Any, body: Any, request_headers: Any, response_headers: Any) -> str:
            event = json.loads(body) if body else {}
            workflows.invocations.append(event)
            # a part that never ends fails the test, not hangs
            if len(workflows.invocations) > MAX_INVOCATIONS:
                response_headers["x-amz-function-error"] = "Unhandled"
                message = f"the worker was invoked over {MAX_INVOCATIONS} times: a loop that never ends"
                workflows.errors.append(message)
                return json.dumps({"errorType": "EndlessLoop", "errorMessage": message})
            with calls.acting(world.worker_role):
                try:
                    result = worker.handler(event, Context(workflows.remaining_seconds))
                except Exception as error:  # what Lambda reports for an unhandled error
                    workflows.errors.append(f"{type(error).__name__}: {error}")
                    response_headers["x-amz-function-error"] = "Unhandled"
                    return json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)})
            return json.dumps(result)

        world.monkeypatch.setattr(LambdaFunction, "invoke", invoke)
        # The worker's own backoff (its OpenSearch client, the sync's batch path) is recorded, not slept.
        self.worker_sleeps = Clock()
        build_ports = worker.build_ports

        def ports(*args: Any, **kwargs: Any) -> Any:
            made = build_ports(*args, **kwargs)
            made.sleep = self.worker_sleeps.sleep
            return made

        world.monkeypatch.setattr(worker, "build_ports", ports)
        recorded = functools.partial(worker.IndexClient, sleep=self.worker_sleeps.sleep)
        world.monkeypatch.setattr(worker, "IndexClient", recorded)
        world.monkeypatch.setattr(deployed, "pause", follow)

    def operator(self) -> str:
        """An operator's role with what docs/operations.md says a deployed run needs, and no more: describe the
        stacks, start and follow the workflows, list the ops bucket under `runs/` only (an `s3:prefix`
        condition) and read `runs/*`."""
        arn = f"arn:aws:iam::{self.world.account}:role/ops-operator"
        bucket = f"arn:aws:s3:::{self.world.ops_bucket}"
        follow = ["cloudformation:DescribeStacks", "states:StartExecution", "states:DescribeExecution"]
        runs_only = {"Condition": {"StringLike": {"s3:prefix": ["runs/*"]}}}
        self.calls.policies.identity[arn] = [
            {
                "Statement": [
                    {"Effect": "Allow", "Action": [*follow, "states:GetExecutionHistory"], "Resource": "*"},
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{bucket}/runs/*"},
                    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket} | runs_only,
                    {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"},
                ]
            }
        ]
        return arn

    def run(self, *argv: str, capsys: pytest.CaptureFixture[str]) -> Run:
        """`python -m ops <argv> --env <env>` as an operator: the CLI starts the execution, follows it, prints its
        summary."""
        operation = argv[0]
        with self.calls.acting(None):
            self.world.machine(operation)
        self.calls.keys["ak"] = self.world.machine_roles[operation]  # moto's interpreter calls AWS as "ak"
        capsys.readouterr()
        with self.calls.acting(self.operator()):
            status = cli.main([*argv, "--env", self.world.config.name])
        out = capsys.readouterr().out
        summary = json.loads(out.splitlines()[-1])
        assert "execution" in summary, f"the CLI failed before or while following the execution: {summary}"
        arn = summary["execution"]["arn"]
        sfn = boto3.client("stepfunctions", region_name=self.world.region)
        history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        return Run(status, summary, summary["execution"], history)


ADMIN_KEY = "AKIDADMIN"  # the test's own calls sign as the FGAC admin (and are not checked)


def deployed_environment(
    config: EnvironmentConfig, monkeypatch: pytest.MonkeyPatch, node: SecuredNode
) -> Iterator[tuple[World, SdkCalls, Clock, MotoGaps, LoopbackOpenSearch]]:
    """An environment as deployed: the domain front before the secured node (the admin role its FGAC master,
    requests signed with moto's STS session keys acting as the role assumed, the security plugin deciding what each
    role may do), its stacks in moto, every checked call; the test fails on any IAM violation."""
    use_fake_aws(monkeypatch, config.region)
    admin = config.role_arn(config.platform_role_name("search-admin"))
    fgac = FineGrainedAccessControl(
        admin, lambda key: admin if key == ADMIN_KEY else moto_role_of_access_key(key)
    )
    with LoopbackOpenSearch(region=config.region, fgac=fgac, engine=node) as server:
        for world, calls, clock, gaps in workflows_world(config, server.endpoint, monkeypatch):
            server.access = world.domain_access()
            monkeypatch.setenv("AWS_ACCESS_KEY_ID", ADMIN_KEY)
            yield world, calls, clock, gaps, server
            assert not calls.violations, "\n".join(map(str, calls.violations))
            report_decisions(server.access, config.name)


def report_decisions(access: DomainAccess | None, environment: str) -> None:
    """Add the domain's IAM decisions on signed requests to `IAM_CHECK_REPORT` (figures for the docs and notes)."""
    if access is not None:
        report(
            [role, action, f"signed:{decision}", environment] for role, action, _, decision in access.decided
        )


def report(rows: Iterable[list[str]]) -> None:
    """Add `rows` to the file `IAM_CHECK_REPORT` names, if any (figures for the docs and notes)."""
    if path := os.environ.get("IAM_CHECK_REPORT"):
        with open(path, "a") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)


def running_execution(thread: threading.Thread) -> bool:
    """A thread of moto's Step Functions interpreter that is still running an execution."""
    target = getattr(thread, "_target", None)  # cleared once the thread has run
    return thread.is_alive() and str(getattr(target, "__module__", "")).startswith("moto.")


def follow(seconds: float) -> None:
    """The CLI's pause between two looks at a run it follows: instead of sleeping on the real clock, wait (bounded)
    for one of the interpreter's execution threads to end, after which the run's state may have changed."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and running_execution(thread):
            thread.join(60)
            return


def settle(before: set[threading.Thread], seconds: float = 120.0) -> None:
    """Wait for the interpreter's threads that the test started (a failed map's other children can still be
    retrying when the parent execution ends). One left running would invoke the worker during the next test, with
    that test's environment, moto state and recorded calls. The loopback server's connection threads live as long
    as a client's connection and are not waited for."""

    def interpreter(thread: threading.Thread) -> bool:
        return thread not in before and running_execution(thread)

    deadline = time.monotonic() + seconds
    for thread in [t for t in threading.enumerate() if interpreter(t)]:
        thread.join(max(0.0, deadline - time.monotonic()))
    running = [t.name for t in threading.enumerate() if interpreter(t) and t.is_alive()]
    assert not running, f"execution threads still running {seconds:g} s after the test: {running}"


def workflows_world(
    config: EnvironmentConfig, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[World, SdkCalls, Clock, MotoGaps]]:
    """Everything a workflow test needs, inside one moto session."""
    monkeypatch.setenv("MOTO_ACCOUNT_ID", config.account)
    clock = Clock()
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        gaps = MotoGaps(monkeypatch, clock)
        world = World(config, endpoint, monkeypatch)
        calls = SdkCalls(world.policies, account=world.account, region=world.region)
        with calls.installed():
            before = set(threading.enumerate())
            yield world, calls, clock, gaps
            settle(before)
        report([call.role, call.action, call.operation, config.name] for call in calls.checked)
