"""Smoke run: prove on the deployed services that a write to DynamoDB becomes a searchable document, follows its
item through an update and a delete, and never reaches a reader.

`python -m ops smoke --env <env>` (the deploy workflow runs it after each environment's `cdk deploy`) starts the
smoke workflow, whose worker runs inside the VPC like the other ops operations. One part per indexable schema, in
the table that holds it, each with its own canary (refdata.reserved: a reserved scope, a key unique to the run):

    write             put the canary through the key conventions (globalid.create_item), every declared attribute set
    indexed           wait until the read alias returns it, version 1 (for a new event source mapping, in the workflow)
    reader-live       each configured read role that names the schema (signed as its probe role) sees nothing of it
    updated           update it (version 2), wait until the read alias returns version 2
    tombstone         delete it, wait until the write index holds its tombstone and the read alias hides it
    reader-tombstone  no read role sees the tombstone
    cleanup           delete the item and every document of the canary's id (conditionally on what was read)

Each wait lasts at most the step's wait (`SMOKE_WAIT_SECONDS`) inside one invocation. A new event source mapping
"may take several minutes to start polling" (Lambda Developer Guide): when the canary is not indexed in time and its
table's mapping was modified less than the start-up budget ago (`SMOKE_STARTUP_MINUTES`, config
`ops.smoke_startup_minutes`), the part pauses (`PartState.paused`) with the canary in place, the workflow waits
(infra/constructs/ops_workflows.py, `STARTUP_CHECK_SECONDS`) and invokes it again to check, until the canary is
indexed or the budget is spent: no invocation's 15 minutes cap that wait.

Each step is timed. The first step that fails ends the part with a verdict naming the step and the component:

- `alias missing`: the schema's read alias or write index is gone (nothing is written then);
- `stream not flowing`: the change never reached the index and the index takes the document: the event source
  mapping is disabled, or enabled but silent;
- `sync erroring`: the mapping reports that the function fails, or the index refuses writes for now;
- `document refused`: the index refuses the canary's document for good (the sync dead-letters it);
- `reader leak`: a read role sees the canary, its internal fields or its tombstone (or cannot read at all);
- `table`, `search domain`: DynamoDB or OpenSearch refused the smoke run's own requests.

When a wait times out, the component is found by asking the event source mapping (Lambda's GetEventSourceMapping:
state and last processing result) and then by writing the canary's current state itself, the way reconcile repairs
a document (the stream sync's own batch path, a repair sequence number): refused, held, or applied.

Safe at any time: a canary lives in a scope no reader sees and no other tool reports (reconcile skips it), its key
is unique to the run, and nothing is shared between runs. A part that a crash interrupted is cleaned up by finish,
and each part also sweeps canaries of its schema that earlier runs left over an hour ago (a pipeline that was down
delivers their changes late). It never touches anything else: no alias, no setting, no other document.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from refdata.globalid import create_item, update_attributes
from refdata.indexnames import index_pattern, read_alias
from refdata.keys import document_id
from refdata.registry import Visibility, get_schema, indexable_schemas
from refdata.reserved import CANARY, canary_key, sample_attributes, scope_prefix
from refdata.transport import OpenSearchTransport, assume_role, path_segment
from search.admin import JsonApi
from stream_sync.config import ConfigError, parsed_env
from stream_sync.sync import Fate, Ports

from ops import clients
from ops.index import Hit, OpsError, TransientFailure
from ops.runs import Merged, PartState, Run
from ops.workflow import DONE, FAILED, Env
from ops.writes import BACKFILL_SEQ, Write, WriteResult, apply_writes, repair_seq

STEPS: Final = ("write", "indexed", "reader-live", "updated", "tombstone", "reader-tombstone", "cleanup")
DEFAULT_WAIT_SECONDS: Final = 120.0
DEFAULT_STARTUP_MINUTES: Final = 7
DEFAULT_POLL_SECONDS: Final = 1.0
# Far beyond a run's longest wait: a canary this old belongs to no running run.
SWEEP_AGE_SECONDS: Final = 3600
# The least a cleanup after an early failure waits for the canary's delete to reach the index (it ends as soon as the
# tombstone is there): a short step wait must not leave the delete's own document behind.
SETTLE_FLOOR_SECONDS: Final = 10.0
CANARY_RUN, CANARY_VERSION, CANARY_AT = "canaryRun", "canaryVersion", "canaryAt"
ALIAS_KINDS: Final = frozenset({"write-alias-missing", "index-missing", "write-index-undefined"})
PASS: Final = "pass"
# Failures after which the canary's delete cannot reach the index in time: the cleanup does not wait for it.
STALLED: Final = frozenset({"stream not flowing", "sync erroring", "alias missing"})


class SmokeError(OpsError):
    """A step of a canary failed: which step, which component, why."""

    def __init__(self, step: str, component: str, reason: str) -> None:
        super().__init__(f"{step} ({component}): {reason}")
        self.step, self.component, self.reason = step, component, reason


@dataclass(frozen=True)
class Reader:
    """A configured read role, and the probe role the smoke signs as to see what it sees (mapped to it alone)."""

    name: str
    schemas: tuple[str, ...]
    probe_role_arn: str


@dataclass(frozen=True)
class SmokeSettings:
    """The worker's smoke settings (set by the stack): each table's event source mapping, the read roles with their
    probe roles, and how long a step waits."""

    region: str
    mappings: Mapping[str, str]  # table name -> event source mapping UUID
    readers: tuple[Reader, ...]
    wait_seconds: float = DEFAULT_WAIT_SECONDS
    poll_seconds: float = DEFAULT_POLL_SECONDS
    # A new event source mapping "may take several minutes to start polling" (Lambda Developer Guide): the first
    # wait goes on in the workflow until this long after the mapping was last modified, if that is later than its
    # own end.
    startup_seconds: float = DEFAULT_STARTUP_MINUTES * 60.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SmokeSettings:
        def loaded(name: str) -> Any:
            try:
                return json.loads(environ.get(name, "").strip() or "null")
            except ValueError as error:
                raise OpsError(f"{name} is not JSON: {error}") from None

        mappings = loaded("EVENT_SOURCE_MAPPINGS") or {}
        if not isinstance(mappings, dict):
            raise OpsError(
                "EVENT_SOURCE_MAPPINGS must be a JSON object {table name: event source mapping UUID}"
            )
        try:
            readers = tuple(
                Reader(str(r["name"]), tuple(r["schemas"]), str(r["probeRoleArn"]))
                for r in loaded("SMOKE_READERS") or []
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise OpsError(
                f"SMOKE_READERS must be a JSON list of {{name, schemas, probeRoleArn}}: {error!r}"
            ) from None
        try:
            wait = parsed_env(environ, "SMOKE_WAIT_SECONDS", float, DEFAULT_WAIT_SECONDS)
            poll = parsed_env(environ, "SMOKE_POLL_SECONDS", float, DEFAULT_POLL_SECONDS)
            startup = 60 * parsed_env(environ, "SMOKE_STARTUP_MINUTES", float, float(DEFAULT_STARTUP_MINUTES))
        except ConfigError as error:
            raise OpsError(str(error)) from None
        return cls(
            region=environ.get("AWS_REGION", "").strip() or environ.get("AWS_DEFAULT_REGION", ""),
            mappings={str(table): str(uuid) for table, uuid in mappings.items()},
            readers=readers,
            wait_seconds=wait,
            poll_seconds=poll,
            startup_seconds=startup,
        )


@dataclass
class Tools:
    """The smoke run's own I/O beside the operations' `Env`: tables to write, the event source mappings, what a
    reader sees, the clock."""

    table: Callable[[str], Any]  # a boto3 Table resource by name
    lambda_: Any
    reader: Callable[[Reader], ReaderView]
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], float] = time.time


def aws_tools(env: Env, settings: SmokeSettings) -> Tools:
    dynamodb = clients.resource("dynamodb", settings.region)

    def reader(role: Reader) -> ReaderView:
        credentials = assume_role(
            role.probe_role_arn,
            settings.region,
            session_name="ops-smoke-reader",
            sts=clients.client("sts", settings.region),
        )
        endpoint = env.settings.opensearch_endpoint
        return ReaderView(
            OpenSearchTransport(
                endpoint,
                settings.region,
                timeout_seconds=env.settings.request_timeout_seconds,
                credentials=credentials,
            )
        )

    return Tools(table=dynamodb.Table, lambda_=clients.client("lambda", settings.region), reader=reader)


def _key_query(pk: str, sk: str) -> dict[str, Any]:
    """The one document `<pk>#<sk>`."""
    return {"bool": {"filter": [{"term": {"pk": pk}}, {"term": {"sk": sk}}]}}


class ReaderView:
    """What a read role's requests return: `_search` and `_doc` through a read alias (the paths its access policy
    allows), as its probe role signs them."""

    def __init__(self, transport: OpenSearchTransport) -> None:
        self._transport = transport
        self._api = JsonApi(
            transport, error=OpsError, transient=TransientFailure, max_attempts=3, backoff_seconds=0.5
        )

    def close(self) -> None:
        self._transport.close()

    def seen(self, alias: str, pk: str, sk: str) -> list[dict[str, Any]]:
        """Every `_source` of the document `<pk>#<sk>` the reader gets, by search or by id."""
        body = {"query": _key_query(pk, sk), "size": 5}
        hits = self._api.send("POST", f"{path_segment(alias)}/_search", body).json()
        found = [dict(hit.get("_source") or {}) for hit in hits["hits"]["hits"]]
        answer = self._api.request("GET", f"{path_segment(alias)}/_doc/{path_segment(document_id(pk, sk))}")
        if answer.status == 200 and answer.json().get("found"):
            found.append(dict(answer.json().get("_source") or {}))
        elif answer.status not in (200, 404):
            raise OpsError(f"GET {alias}/_doc failed: {answer.error_reason()}")
        return found


@dataclass
class CanaryReport:
    schema: str
    table: str
    doc_id: str
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    failure: SmokeError | None = None
    left: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    swept: int = 0
    wrote: bool = False  # the canary's item was put
    # Set when the canary waits for its table's new event source mapping: what the next invocation goes on with.
    awaiting: dict[str, Any] | None = None


class Smoke:
    name = "smoke"

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        tools: Callable[[Env, SmokeSettings], Tools] = aws_tools,
    ) -> None:
        self._environ = environ
        self._tools = tools

    def settings(self) -> SmokeSettings:
        return SmokeSettings.from_env(os.environ if self._environ is None else self._environ)

    # --- the workflow's steps ------------------------------------------------------------------------------------

    def prepare(self, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
        parts = []
        for schema in indexable_schemas():
            parts.append({"kind": "canary", "name": schema.name, "table": env.table_for(schema.name)})
        record = {
            "operation": self.name,
            "runId": run.run_id,
            "startedAt": env.now(),
            "source": "none",
            "expectedItems": len(parts),
            "parts": parts,
        }
        run.save_record(record)
        return record

    def pages(self, env: Env, run: dict[str, Any], state: PartState) -> Iterator[tuple[Any, Any]]:
        """First the plan (the canary's key, saved before anything is written, so finish can always clean it up),
        then the run itself, one page."""
        cursor = state.cursor
        if not cursor:
            cursor = _plan(run, state.part)
            yield {"step": "plan", **cursor}, cursor
        elif cursor.get("awaiting"):
            # The workflow waited for the table's new event source mapping: check again, and go on if it delivered.
            yield {"step": "check", **cursor}, {**cursor, "finished": True}
            return
        elif not cursor.get("finished"):
            # A retried invocation: an earlier one may have written this canary (a conditional create would then
            # refuse it as another writer's). That one is cleaned up and a fresh key planned, saved before use.
            fresh = _plan(run, state.part)
            yield {"step": "replan", **cursor, "fresh": fresh}, fresh
            cursor = fresh
        if not cursor.get("finished"):
            yield {"step": "run", **cursor}, {**cursor, "finished": True}

    def process(self, env: Env, run: dict[str, Any], state: PartState, page: Any, ports: Ports) -> None:
        cursor = dict(page)
        doc_id = document_id(cursor["pk"], cursor["sk"])
        if cursor["step"] == "plan":
            state.list("canaries", [doc_id])
            return
        settings = self.settings()
        tools = self._tools(env, settings)
        if cursor["step"] == "replan":
            table = str(state.part["table"])
            written = bool(
                env.dynamodb.get_item(
                    TableName=table,
                    Key={"pk": {"S": cursor["pk"]}, "sk": {"S": cursor["sk"]}},
                    ConsistentRead=True,
                ).get("Item")
            )
            settle = max(settings.wait_seconds, SETTLE_FLOOR_SECONDS) if written else 0.0
            left = cleanup(
                env,
                tools,
                state.part["name"],
                table,
                cursor["pk"],
                cursor["sk"],
                settle_seconds=settle,
                poll_seconds=settings.poll_seconds,
            )
            if left:
                state.list(f"left:{state.part['name']}", left)
            else:
                state.list("cleaned", [doc_id])
            fresh = cursor["fresh"]
            state.list("canaries", [document_id(fresh["pk"], fresh["sk"])])
            return
        if cursor["step"] == "check" and not _first_version_stored(env, state.part, cursor):
            # An earlier attempt of this check went on past the first version and was interrupted: back to the plan,
            # which the next invocation cleans up and replaces, as for any interrupted attempt.
            state.cursor = {key: value for key, value in cursor.items() if key not in ("step", "awaiting")}
            state.paused = True
            return
        report = run_canary(env, settings, tools, state.part, cursor, run_id=str(run["runId"]))
        if report.awaiting is not None:
            state.cursor = {key: value for key, value in cursor.items() if key != "step"}
            state.cursor["awaiting"] = report.awaiting
            state.paused = True
            return
        state.items += 1
        state.matched += report.failure is None and not report.left
        for step, seconds in report.steps.items():
            state.counts[f"ms:{report.schema}:{step}"] = round(seconds * 1000)
        state.counts[f"swept:{report.schema}"] += report.swept
        if not report.left:
            state.list("cleaned", [doc_id])
        state.list(f"left:{report.schema}", report.left)
        state.list(f"notes:{report.schema}", report.notes)
        if report.failure is not None:
            state.fail(
                {
                    "documentId": doc_id,
                    "schema": report.schema,
                    "table": report.table,
                    "step": report.failure.step,
                    "component": report.failure.component,
                    "reason": report.failure.reason[:1000],
                }
            )

    def finish(self, env: Env, run: dict[str, Any], merged: Merged, error: str | None) -> dict[str, Any]:
        parts = run.get("parts", [])
        cleaned = set(merged.listed.get("cleaned", []))
        stragglers = [doc_id for doc_id in merged.listed.get("canaries", []) if doc_id not in cleaned]
        left: list[str] = []
        for doc_id in stragglers:  # a part that crashed mid-run: its canary's key was saved first
            pk, _, sk = doc_id.partition("#")
            part = next((p for p in parts if pk.startswith(f"{p['name']}::")), None)
            if part is not None:
                settings = self.settings()
                try:
                    left += cleanup(
                        env,
                        self._tools(env, settings),
                        part["name"],
                        part["table"],
                        pk,
                        sk,
                        settle_seconds=max(settings.wait_seconds, SETTLE_FLOOR_SECONDS),
                        poll_seconds=settings.poll_seconds,
                    )
                except (
                    Exception
                ) as problem:  # the verdict still stands; say what could not be cleaned, and why
                    left.append(f"{doc_id}: cleanup failed: {problem!r:.300}")
        # The sync may have dead-lettered a failed canary's records: once, here, after every part (parts looking at
        # the queue at once would hide each other's letters).
        failed = sorted({str(f["documentId"]) for f in merged.failures if f.get("documentId")})
        if failed:
            left += remove_dead_letters(env, failed)
        failures = {str(f["schema"]): f for f in merged.failures}
        targets = []
        for part in parts:
            schema = part["name"]
            steps = {
                step: merged.counts[f"ms:{schema}:{step}"] / 1000
                for step in STEPS
                if f"ms:{schema}:{step}" in merged.counts
            }
            failure = failures.get(schema)
            targets.append(
                {
                    "schema": schema,
                    "table": part["table"],
                    "passed": failure is None and not merged.listed.get(f"left:{schema}"),
                    "steps": steps,
                    "failure": failure,
                    "left": merged.listed.get(f"left:{schema}", []),
                    "notes": merged.listed.get(f"notes:{schema}", []),
                    "swept": merged.counts.get(f"swept:{schema}", 0),
                }
            )
        verdict = _verdict(targets, left, error or "; ".join(merged.errors) or None)
        summary: dict[str, Any] = {
            "command": self.name,
            "verdict": verdict,
            "targets": targets,
            "leftBehind": left + [item for t in targets for item in t["left"]],
            "errors": merged.errors,
        }
        started = run.get("startedAt")
        if isinstance(started, int | float):
            summary["wallSeconds"] = round(env.now() - started, 3)
        return summary | {"status": DONE if verdict == PASS and merged.finished else FAILED}


def runbook(component: str) -> str:
    """The runbook section of a verdict's component."""
    return f"docs/runbook.md#smoke-{component.replace(' ', '-')}"


def _verdict(targets: Sequence[Mapping[str, Any]], left: Sequence[str], error: str | None) -> str:
    """`pass`, or what failed first: the step, the component, the reason, and where."""
    for target in targets:
        failure = target["failure"]
        if failure:
            return (
                f"FAILED at {failure['step']} ({failure['component']}): {failure['reason']} "
                f"[schema {target['schema']}, table {target['table']}; what to do: {runbook(failure['component'])}]"
            )
    for target in targets:
        if target["left"]:
            return f"FAILED at cleanup (left behind): {', '.join(target['left'])}"
    if left:
        return f"FAILED at cleanup (left behind): {', '.join(left)}"
    if error:
        return f"FAILED (smoke run): {error}"
    missing = [t["schema"] for t in targets if not t["steps"]]
    if missing:
        return f"FAILED (smoke run): no canary ran for {', '.join(missing)}"
    return PASS


# --- one canary ----------------------------------------------------------------------------------------------------


def run_canary(
    env: Env,
    settings: SmokeSettings,
    tools: Tools,
    part: Mapping[str, Any],
    cursor: Mapping[str, Any],
    *,
    run_id: str,
) -> CanaryReport:
    """The canary's lifecycle (module doc), or its part from the check after a pause (`cursor["awaiting"]`),
    ending with its cleanup and a sweep of old leftovers; or paused again (`report.awaiting`), the canary kept."""
    schema, table_name = str(part["name"]), str(part["table"])
    pk, sk = str(cursor["pk"]), str(cursor["sk"])
    report = CanaryReport(schema, table_name, document_id(pk, sk))
    lifecycle = Lifecycle(env, settings, tools, report, pk, sk, dict(cursor.get("attributes") or {}), run_id)
    awaiting = cursor.get("awaiting")
    ended = True
    try:
        ended = lifecycle.resume(awaiting) if awaiting else lifecycle.run()
    except SmokeError as failure:
        report.failure = failure
    except OpsError as failure:  # the domain refused or did not answer one of the smoke run's own requests
        report.failure = SmokeError(lifecycle.step, "search domain", str(failure))
    finally:
        if ended:
            _clean_up_after(env, settings, tools, report, pk, sk)
    if not ended:
        report.awaiting = lifecycle.awaiting
    return report


def _clean_up_after(
    env: Env, settings: SmokeSettings, tools: Tools, report: CanaryReport, pk: str, sk: str
) -> None:
    """The canary's cleanup and the sweep of old leftovers, timed as the `cleanup` step."""
    started = tools.monotonic()
    try:
        flowing = report.wrote and report.failure is not None and report.failure.component not in STALLED
        report.left = cleanup(
            env,
            tools,
            report.schema,
            report.table,
            pk,
            sk,
            settle_seconds=max(settings.wait_seconds, SETTLE_FLOOR_SECONDS) if flowing else 0.0,
            poll_seconds=settings.poll_seconds,
        )
        report.swept = sweep(env, tools, report.schema, report.table)
    except Exception as failure:  # whatever stopped the cleanup is reported, never swallowed
        report.left = [f"{report.doc_id}: cleanup failed: {failure!r:.300}"]
    report.steps["cleanup"] = tools.monotonic() - started


def _first_version_stored(env: Env, part: Mapping[str, Any], cursor: Mapping[str, Any]) -> bool:
    """Whether the table holds the canary as its first step wrote it (version 1), as a check expects."""
    keys = {"pk": {"S": str(cursor["pk"])}, "sk": {"S": str(cursor["sk"])}}
    item = env.dynamodb.get_item(TableName=str(part["table"]), Key=keys, ConsistentRead=True).get("Item")
    return item is not None and item.get(CANARY_VERSION, {}).get("N") == "1"


def _plan(run: Mapping[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    """A canary key unique to the run and the attempt."""
    token = f"{run['runId']}-{secrets.token_hex(3)}"
    pk, sk, attributes = canary_key(part["name"], token)
    return {"pk": pk, "sk": sk, "attributes": attributes, "token": token}


class Lifecycle:
    """The steps of one canary, timed; each failure a `SmokeError`."""

    def __init__(
        self,
        env: Env,
        settings: SmokeSettings,
        tools: Tools,
        report: CanaryReport,
        pk: str,
        sk: str,
        key_attributes: dict[str, Any],
        run_id: str,
    ) -> None:
        self.env, self.settings, self.tools, self.report = env, settings, tools, report
        self.pk, self.sk, self.key_attributes, self.run_id = pk, sk, key_attributes, run_id
        self.schema = report.schema
        self.alias = read_alias(self.schema)
        self.step = "write"
        self.view = self.alias
        self.write_index = ""
        self.awaiting: dict[str, Any] | None = (
            None  # what a pause keeps for the check after the workflow's wait
        )

    def run(self) -> bool:
        """Every step; False when the canary waits for its table's new event source mapping (`awaiting`)."""
        self._check_aliases()
        table = self.tools.table(self.report.table)
        self._timed("write", lambda: self._table("put", lambda: create_item(table, self._item())))
        self.report.wrote = True
        self.step = "indexed"
        since, started = self.tools.now(), self.tools.monotonic()
        if not self._arrives(1, self.settings.wait_seconds):
            until = self._startup_deadline()
            if until is None:
                raise self._not_arrived(1, self.settings.wait_seconds)
            self.awaiting = {
                "since": since,
                "until": until,
                "steps": self.report.steps,
                "notes": self.report.notes,
            }
            return False
        self.report.steps["indexed"] = self.tools.monotonic() - started
        self._after_indexed(table)
        return True

    def resume(self, awaiting: Mapping[str, Any]) -> bool:
        """After the workflow's wait: on with the steps once the canary is indexed; False while the start-up budget
        lasts; past it, what is wrong."""
        self.report.steps.update(awaiting["steps"])
        self.report.notes.extend(awaiting["notes"])
        self._check_aliases()
        self.report.wrote = True
        self.step = "indexed"
        since = float(awaiting["since"])
        if not self._arrived(1):
            if self.tools.now() < float(awaiting["until"]):
                self.awaiting = dict(awaiting)
                return False
            raise self._not_arrived(1, round(self.tools.now() - since))
        self.report.steps["indexed"] = self.tools.now() - since
        self._after_indexed(self.tools.table(self.report.table))
        return True

    def _after_indexed(self, table: Any) -> None:
        self._timed("reader-live", self._readers)
        self._timed("updated", lambda: self._update(table))
        self._timed("tombstone", lambda: self._delete(table))
        self._timed("reader-tombstone", self._readers)

    def _note(self, text: str) -> None:
        if text not in self.report.notes:
            self.report.notes.append(text)

    def _update(self, table: Any) -> None:
        changes = {CANARY_VERSION: 2, **self._attributes(2)}
        self._table("update", lambda: update_attributes(table, self.pk, self.sk, changes))
        self._wait_for(2)

    def _delete(self, table: Any) -> None:
        self._table("delete", lambda: table.delete_item(Key={"pk": self.pk, "sk": self.sk}))
        self._wait_for(None)

    def _table(self, what: str, action: Callable[[], Any]) -> None:
        """A write to the source table; whatever refuses it (a permission, throttling, a condition) fails the step
        as the table's."""
        try:
            action()
        except Exception as error:
            raise SmokeError(
                self.step, "table", f"{what} refused: {type(error).__name__}: {error}"[:600]
            ) from error

    def _timed(self, step: str, action: Callable[[], Any]) -> None:
        self.step = step
        started = self.tools.monotonic()
        action()
        self.report.steps[step] = self.tools.monotonic() - started

    def _check_aliases(self) -> None:
        self.step = "write"
        state = self.env.client.alias_state(self.schema)
        write_index = state.write_index
        if not state.read_holders or write_index is None:
            missing = [
                *([f"read alias {self.alias}"] if not state.read_holders else []),
                *([f"write alias {self.schema}-write (no write index)"] if write_index is None else []),
            ]
            raise SmokeError("write", "alias missing", f"{' and '.join(missing)}: nothing was written")
        self.write_index = write_index
        if state.read_holders != (write_index,):
            self.view = write_index
            self._note(
                f"a mapping change is in progress (read alias on {', '.join(state.read_holders)}, write index "
                f"{write_index}): searchability checked on {write_index}"
            )

    def _attributes(self, version: int) -> dict[str, Any]:
        today = datetime.fromtimestamp(self.tools.now(), UTC).date()
        return sample_attributes(self.schema, f"refdata smoke canary version {version}", today)

    def _item(self) -> dict[str, Any]:
        return {
            "pk": self.pk,
            "sk": self.sk,
            **self.key_attributes,
            **self._attributes(1),
            CANARY_RUN: self.run_id,
            CANARY_VERSION: 1,
            CANARY_AT: int(self.tools.now()),
        }

    def _current(self) -> tuple[Hit | None, Mapping[str, Any] | None]:
        """The canary as the read view shows it (live only), and its document in the write index (any)."""
        hits = self.env.client.search_page(
            self.view, query=_key_query(self.pk, self.sk), after=None, page_size=1
        )
        stored = self.env.client.get_documents(self.write_index, [self.report.doc_id])
        return (hits[0] if hits else None), stored.get(self.report.doc_id)

    def _arrived(self, version: int | None) -> bool:
        live, stored = self._current()
        shown = live is not None and live.source.get("tombstone") is not True
        if (
            version is None
        ):  # the read alias hides a tombstone; a concrete index (a reindex in progress) shows it
            return not shown and stored is not None and stored.get("tombstone") is True
        return shown and live is not None and live.source.get(CANARY_VERSION) == version

    def _startup_deadline(self) -> float | None:
        """Until when (epoch seconds) the first version may still arrive: the start-up budget after the table's event
        source mapping was last modified, when that is still ahead (a first deploy: the mapping may not have started
        polling yet); else None."""
        uuid = self.settings.mappings.get(self.report.table)
        if uuid is None:
            return None
        try:
            modified = self.tools.lambda_.get_event_source_mapping(UUID=uuid).get("LastModified")
        except Exception:  # no allowance; the diagnosis says what is wrong
            return None
        if modified is None:
            return None
        stamp = modified.timestamp() if hasattr(modified, "timestamp") else float(modified)
        until = stamp + self.settings.startup_seconds
        now = self.tools.now()
        if until <= now:
            return None
        self._note(
            f"the event source mapping of table {self.report.table} is new (modified {now - stamp:.0f} s ago): "
            f"the smoke workflow checks for the canary until {until - now:.0f} s from now"
        )
        return until

    def _wait_for(self, version: int | None) -> None:
        """Until the read view shows `version` (None: the tombstone), or the step's wait is up: then what is wrong."""
        if not self._arrives(version, self.settings.wait_seconds):
            raise self._not_arrived(version, self.settings.wait_seconds)

    def _arrives(self, version: int | None, seconds: float) -> bool:
        """Whether the read view shows `version` within `seconds`, polling."""
        deadline = self.tools.monotonic() + seconds
        while not self._arrived(version):
            if self.tools.monotonic() >= deadline:
                return False
            self.tools.sleep(self.settings.poll_seconds)
        return True

    def _not_arrived(self, version: int | None, seconds: float) -> SmokeError:
        what = f"version {version}" if version is not None else "its tombstone"
        component, reason = diagnose(
            self.env, self.settings, self.tools, self.report, self.pk, self.sk, self.write_index
        )
        return SmokeError(
            self.step,
            component,
            f"the canary {self.report.doc_id} did not show {what} within {seconds:g} s: {reason}",
        )

    def _readers(self) -> None:
        readers = [reader for reader in self.settings.readers if self.schema in reader.schemas]
        note = f"no configured read role reads {self.schema}"
        if not readers and note not in self.report.notes:
            self.report.notes.append(note)
        internal = set(get_schema(self.schema).attributes_of(visibility=Visibility.INTERNAL))
        for reader in readers:
            try:
                view = self.tools.reader(reader)
            except Exception as error:  # STS: the probe role cannot be assumed
                raise SmokeError(
                    self.step, "reader leak", f"cannot act as {reader.name}'s probe: {error!r:.300}"
                ) from error
            try:
                seen = view.seen(self.alias, self.pk, self.sk)
            except OpsError as error:
                raise SmokeError(
                    self.step,
                    "reader leak",
                    f"read role {reader.name} cannot read {self.alias} at all: {error}",
                ) from error
            finally:
                view.close()
            for source in seen:
                if source.get("tombstone") is True:
                    what = "its tombstone"
                else:
                    fields = sorted(internal & set(source))
                    what = "the canary" + (f" and its internal fields {', '.join(fields)}" if fields else "")
                raise SmokeError(
                    self.step, "reader leak", f"read role {reader.name} sees {what} ({self.report.doc_id})"
                )


def diagnose(
    env: Env, settings: SmokeSettings, tools: Tools, report: CanaryReport, pk: str, sk: str, write_index: str
) -> tuple[str, str]:
    """Why a change of the canary did not arrive: (component, reason)."""
    uuid = settings.mappings.get(report.table)
    mapping: Mapping[str, Any] = {}
    if uuid is None:
        known = "unknown (EVENT_SOURCE_MAPPINGS names none for this table)"
    else:
        try:
            mapping = tools.lambda_.get_event_source_mapping(UUID=uuid)
            known = ""
        except Exception as error:  # the diagnosis goes on without it
            known = f"unknown ({type(error).__name__}: {error!s:.200})"
    state = str(mapping.get("State", "")) if mapping else ""
    result = str(mapping.get("LastProcessingResult") or "none")
    if state and state != "Enabled":
        reason = mapping.get("StateTransitionReason", "")
        return "stream not flowing", f"the event source mapping of table {report.table} is {state} ({reason})"
    if result.startswith("PROBLEM"):
        return "sync erroring", f"the event source mapping of table {report.table} reports {result!r}"
    probe = _probe_write(env, report, pk, sk, write_index)
    if probe.fate is Fate.REJECTED:
        return "document refused", f"the index refuses the canary's document: {probe.reason}"
    if probe.fate is Fate.RETRY:
        kind = (probe.reason or "").split(":", 1)[0]
        component = (
            "alias missing" if any(k in (probe.reason or "") for k in ALIAS_KINDS) else "sync erroring"
        )
        return component, f"writes to the index fail for now ({kind}): {probe.reason}"
    mapping_text = known or f"the mapping is {state}, last processing result {result!r}"
    return (
        "stream not flowing",
        f"the index takes the document (written now by the smoke run itself), so its stream record did not reach "
        f"the sync: {mapping_text}",
    )


def _probe_write(env: Env, report: CanaryReport, pk: str, sk: str, write_index: str) -> WriteResult:
    """Write the canary's current state (or its tombstone) as a reconcile repair does, through the sync's own batch
    path: its fate says whether the index would take what the stream should have delivered."""
    keys = {"pk": {"S": pk}, "sk": {"S": sk}}
    item = env.dynamodb.get_item(TableName=report.table, Key=keys, ConsistentRead=True).get("Item")
    stored = env.client.get_documents(write_index, [report.doc_id]).get(report.doc_id)
    seq = stored.get("stream_seq") if stored else None
    label = repair_seq(seq) if isinstance(seq, str) else BACKFILL_SEQ
    (result,) = apply_writes([Write(keys, item, label)], settings=env.settings, ports=env.ports())
    return result


# --- leaving nothing behind ----------------------------------------------------------------------------------------


def cleanup(
    env: Env,
    tools: Tools,
    schema: str,
    table: str,
    pk: str,
    sk: str,
    *,
    settle_seconds: float = 0.0,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
) -> list[str]:
    """Delete the canary's item and every document of its id in the schema's indices (each delete conditional on
    the document as read); what is still there afterwards. With `settle_seconds` (a pipeline that flows, after a
    failure that stopped the canary early) it first waits that long for the delete's tombstone, so the delete's own
    stream record does not bring a document back after the cleanup."""
    doc_id = document_id(pk, sk)
    tools.table(table).delete_item(Key={"pk": pk, "sk": sk})
    indices = env.client.indices(index_pattern(schema))
    deadline = tools.monotonic() + settle_seconds
    while settle_seconds > 0 and tools.monotonic() < deadline:
        stored = [env.client.get_documents(index, [doc_id]).get(doc_id) for index in indices]
        if any(source and source.get("tombstone") is True for source in stored):
            break
        tools.sleep(poll_seconds)
    for index in indices:
        env.client.refresh(index)  # a search sees a write only after a refresh (a second later by default)
        hits = env.client.search_page(index, query=_key_query(pk, sk), after=None, page_size=5)
        if hits:
            env.client.delete_unchanged(index, hits)
            env.client.refresh(index)
    left = []
    keys = {"pk": {"S": pk}, "sk": {"S": sk}}
    if env.dynamodb.get_item(TableName=table, Key=keys, ConsistentRead=True).get("Item"):
        left.append(f"item {doc_id} in table {table}")
    for index in indices:
        if env.client.search_page(index, query=_key_query(pk, sk), after=None, page_size=1):
            left.append(f"document {doc_id} in {index}")
    return left


DLQ_WAIT_SECONDS = 1


def remove_dead_letters(env: Env, doc_ids: Sequence[str], *, batches: int = 20) -> list[str]:
    """Delete the sync's dead letters of the canaries (record and reason: the canary is gone, nothing to redrive),
    making every other message visible again at once; what could not be looked at is reported. The event source
    mapping's own on-failure messages name stream ranges, not documents: they stay for the redrive, which finds the
    canary's item gone and writes its tombstone, which a later run sweeps."""
    if env.sqs is None or not env.dlq_url:
        return []
    from stream_sync.redrive import receive, release

    others = []
    seen_all = True
    for _ in range(batches):
        # Long polling: a short poll samples a subset of SQS's servers and can answer empty while letters wait
        # (Amazon SQS Developer Guide, short and long polling); any wait above 0 s asks them all.
        messages = receive(env.sqs, env.dlq_url, 10, visibility_timeout=60, wait_seconds=DLQ_WAIT_SECONDS)
        if not messages:
            break
        for message in messages:
            try:
                named = json.loads(message.body).get("documentId")
            except (ValueError, AttributeError):
                named = None
            if named in doc_ids:
                env.sqs.delete_message(QueueUrl=env.dlq_url, ReceiptHandle=message.receipt_handle)
            else:
                others.append(message)
    else:
        seen_all = False
    for start in range(0, len(others), 10):
        release(env.sqs, env.dlq_url, others[start : start + 10])
    if seen_all:
        return []
    return [
        f"dead letters of {', '.join(doc_ids)} may remain: the queue holds more than {batches * 10} messages"
    ]


def sweep(env: Env, tools: Tools, schema: str, table: str) -> int:
    """Canaries of earlier runs older than an hour (their pipeline delivered them after the run had cleaned up):
    documents whose item is gone are deleted (conditionally), old items are deleted (their tombstone goes on the
    next run). Returns how many it removed."""
    bound = int(tools.now()) - SWEEP_AGE_SECONDS
    prefix = scope_prefix(schema, CANARY)
    scope = {"prefix": {"pk": prefix}} if prefix.endswith("::") else {"term": {"pk": prefix}}
    old = {
        "bool": {
            "filter": [scope],
            "should": [{"range": {CANARY_AT: {"lt": bound}}}, {"range": {"deletedAt": {"lt": bound}}}],
            "minimum_should_match": 1,
        }
    }
    removed = 0
    for index in env.client.indices(index_pattern(schema)):
        hits = env.client.search_page(index, query=old, after=None, page_size=100)
        gone = []
        for hit in hits:
            pk, sk = str(hit.source.get("pk")), str(hit.source.get("sk"))
            keys = {"pk": {"S": pk}, "sk": {"S": sk}}
            item = env.dynamodb.get_item(TableName=table, Key=keys, ConsistentRead=True).get("Item")
            if item is None:
                gone.append(hit)
            elif int(float(item.get(CANARY_AT, {}).get("N", bound))) < bound:
                tools.table(table).delete_item(Key={"pk": pk, "sk": sk})
                removed += 1
        if gone:
            removed += sum(
                1 for answer in env.client.delete_unchanged(index, gone) if answer.get("status") == 200
            )
    return removed


# --- the report ----------------------------------------------------------------------------------------------------


def render(summary: Mapping[str, Any]) -> str:
    """The summary as the deploy job's log shows it: each canary's steps and times, then the verdict."""
    lines = []
    for target in summary.get("targets", []):
        steps = " · ".join(f"{step} {seconds:.2f} s" for step, seconds in target.get("steps", {}).items())
        mark = "ok" if target.get("passed") else "FAILED"
        lines.append(f"{mark:6} {target['schema']} ({target['table']}): {steps or 'not run'}")
        lines += [f"       note: {note}" for note in target.get("notes", [])]
    lines.append(f"verdict: {summary.get('verdict', summary.get('error', 'unknown'))}")
    return "\n".join(lines)
