"""Stream sync benchmark: documents per second, requests, and handler and engine CPU per record for 1,000-record
batches against a one-request-per-record baseline (same run, same node), handler import time beside `import boto3`,
the deployed asset size, and memory under heavy geometry. `run()` returns a Markdown section for docs/benchmarks.md.

The OpenSearch side is the tests' engine: a real OpenSearch node (tests/support/engine_node.py, installed by
`make engine`), bootstrapped by the product's index bootstrap. The machine is shared, so the ratios are the point.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LAMBDAS = ROOT / "lambdas"
REGION = "ca-central-1"
BATCH = 1000
BATCHES = 9  # the median shrugs off an occasional full GC pause of the engine's JVM


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(LAMBDAS), str(ROOT)])
    env.setdefault("AWS_ACCESS_KEY_ID", "bench")
    env.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    return env


@dataclass(frozen=True)
class Engine:
    """A running test engine (the real OpenSearch node, tests/support/engine_node.py), bootstrapped as a deployment
    bootstraps a domain: `bootstrap_seconds` for the first run on the empty node, `rerun_seconds` for the next."""

    endpoint: str
    pid: int
    start_seconds: float
    bootstrap_seconds: float
    rerun_seconds: float


@contextlib.contextmanager
def engine_node() -> Iterator[Engine]:
    """A fresh node of the tests' engine (`make engine` installs it), bootstrapped by the product's index bootstrap
    (`index_bootstrap.bootstrap.IndexBootstrap`: cluster settings, the stored script and its self-test, templates,
    `<schema>-v1` behind the aliases). Requests go straight to the node: signed, as the product signs them, which
    the node ignores (the SigV4 and access-policy front of the tests is Python and would be measured instead)."""
    from botocore.credentials import Credentials
    from index_bootstrap.bootstrap import IndexBootstrap
    from refdata.registry import indexable_schemas
    from refdata.transport import OpenSearchTransport

    from tests.support.engine_node import EngineNode

    started = time.perf_counter()
    node = EngineNode().start().wait_ready()
    start_seconds = time.perf_counter() - started
    try:
        credentials = Credentials("bench", "bench")
        transport = OpenSearchTransport(node.endpoint, REGION, timeout_seconds=60, credentials=credentials)
        schemas = [schema.name for schema in indexable_schemas()]
        seconds = []
        for _ in range(2):
            started = time.perf_counter()
            IndexBootstrap(transport).run(schemas, replicas=0)
            seconds.append(time.perf_counter() - started)
        transport.close()
        yield Engine(node.endpoint, node.pid, start_seconds, *seconds)
    finally:
        node.stop()


# --------------------------------------------------------------------------- workload


def _ring(i: int) -> list[dict[str, Any]]:
    """A closed pentagon around the item's point, in DynamoDB's number form (a polygon the engine indexes)."""
    import math

    corners = [
        (
            -123.1207 + 0.01 * math.cos(2 * math.pi * k / 5) + i * 1e-6,
            49.2827 + 0.01 * math.sin(2 * math.pi * k / 5),
        )
        for k in range(5)
    ]
    return [{"L": [{"N": f"{lon:.6f}"}, {"N": f"{lat:.6f}"}]} for lon, lat in [*corners, corners[0]]]


def _item(pk: str, sk: str, i: int, version: int) -> dict[str, Any]:
    """About 2 KB as DynamoDB counts it: strings, numbers, a map, a list, a set, a geo_point, a GeoJSON polygon."""
    return {
        "pk": {"S": pk},
        "sk": {"S": sk},
        "globalId": {"S": f"0b9a3c1e-6f1d-4c8e-9a51-{i:012d}"},
        "name": {"S": f"Zone {i} revision {version}"},
        "description": {"S": ("Trailhead parking, day-use area and lake access. " * 30)[:1200]},
        "collectionId": {"S": "bcparks_1"},
        "status": {"S": "open" if i % 3 else "closed"},
        "capacity": {"N": str(100 + i % 400)},
        "price": {"N": "12.50"},
        "rating": {"N": "4.35"},
        "updatedAt": {"N": str(1_764_531_000 + version)},
        "location": {"M": {"lat": {"N": "49.2827"}, "lon": {"N": "-123.1207"}}},
        "bbox": {"L": [{"N": "-123.25"}, {"N": "49.15"}, {"N": "-123.05"}, {"N": "49.35"}]},
        "geometry": {"M": {"type": {"S": "Polygon"}, "coordinates": {"L": [{"L": _ring(i)}]}}},
        "tags": {"SS": ["camping", "hiking", "lake", "parking"]},
        "active": {"BOOL": i % 5 != 0},
        "notes": {"NULL": True},
        "attributes": {"M": {f"feature{j}": {"S": f"value {j} for zone {i}"} for j in range(12)}},
        "openings": {
            "L": [
                {"M": {"day": {"S": day}, "from": {"N": "800"}, "to": {"N": "2000"}}}
                for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
            ]
        },
    }


def make_batch(batch_number: int, size: int = BATCH) -> list[dict[str, Any]]:
    """Mixed INSERT (50%) / MODIFY (35%) / REMOVE (15%) records in Lambda event format, distinct keys. The inserts
    are new keys; the updates and deletes change keys the previous batch number inserted (documents the engine holds
    once that batch was synced)."""
    records = []
    base_seq = 4_000_000_000_000_000_000_000 + batch_number * 10 * size
    for i in range(size):
        kind = "INSERT" if i % 20 < 10 else ("MODIFY" if i % 20 < 17 else "REMOVE")
        j, batch = (i, batch_number) if kind == "INSERT" else (i - 10, batch_number - 1)
        pk, sk = f"geozone::bcparks_{j % 40}", f"{batch:04d}{j:06d}"
        keys = {"pk": {"S": pk}, "sk": {"S": sk}}
        stream: dict[str, Any] = {
            "ApproximateCreationDateTime": time.time(),
            "Keys": keys,
            "SequenceNumber": str(base_seq + i),
            "SizeBytes": 2100,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        }
        if kind != "REMOVE":
            stream["NewImage"] = _item(pk, sk, j, 2)
        if kind != "INSERT":
            stream["OldImage"] = _item(pk, sk, j, 1)
        records.append(
            {
                "eventID": f"{batch_number:04d}{i:028x}",
                "eventName": kind,
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": REGION,
                "dynamodb": stream,
                "eventSourceARN": f"arn:aws:dynamodb:{REGION}:123456789012:table/refdata/stream/2026-11-30T00:00:00.000",
            }
        )
    return records


def item_bytes(record: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (numbers approximated by their text)."""
    from boto3.dynamodb.types import TypeDeserializer
    from refdata.item_size import item_size

    deserializer = TypeDeserializer()
    image = {k: deserializer.deserialize(v) for k, v in record["dynamodb"]["NewImage"].items()}
    return int(item_size(image))


# --------------------------------------------------------------------------- measurements


def _invoke(records: list[dict[str, Any]]) -> tuple[float, float, dict[str, Any]]:
    from stream_sync import handler

    out = io.StringIO()
    context = SimpleNamespace(get_remaining_time_in_millis=lambda: 900_000)
    wall, cpu = time.perf_counter(), time.thread_time()
    with contextlib.redirect_stdout(out):
        response = handler.handler({"Records": records}, context)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    assert response == {"batchItemFailures": []}, response
    emf = json.loads(out.getvalue().splitlines()[-1])
    return wall, cpu, emf


def _configure(endpoint: str, bulk_max_bytes: int = 10 * 1024 * 1024) -> None:
    from stream_sync import handler

    os.environ.update(
        {
            "AWS_REGION": REGION,
            "OPENSEARCH_ENDPOINT": endpoint,
            "DLQ_URL": f"https://sqs.{REGION}.amazonaws.com/123456789012/bench-dlq",
            "BULK_MAX_BYTES": str(bulk_max_bytes),
            "REQUEST_TIMEOUT_SECONDS": "30",
            "ENVIRONMENT_NAME": "bench",
            # As deployed: every record's table is checked against the one holding its schema (wrong-table).
            "SCHEMA_TABLES": json.dumps(
                {"geozone": "refdata", "productDate": "refdata", "booking": "bookings"}
            ),
        }
    )
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    handler.reset()


_TOOK = re.compile(rb'\s*\{\s*"took"\s*:\s*(\d+)\s*,')


def _took_ms(body: bytes) -> float:
    """The reply's `took`, read from its head (the server writes it first), so that measuring it does not
    parse the whole reply a second time; any other shape is parsed in full."""
    match = _TOOK.match(body)
    if match:
        return int(match[1])
    payload = json.loads(body)
    return payload.get("took", 0) if isinstance(payload, dict) else 0


def _install_ports(per_record: bool, took: list[float], sent: list[int]) -> None:
    """Wrap the handler's bulk port: record the server's `took` and, for the baseline, send every action
    as a request of its own (what a per-record sync does), handing the handler the merged replies."""
    from stream_sync import aws, handler
    from stream_sync.sync import HttpReply

    real_build_ports = _install_ports.__dict__.setdefault("real", aws.build_ports)

    def build_ports(settings: Any) -> Any:
        ports = real_build_ports(settings)
        send = ports.bulk

        def timed(body: bytes) -> Any:
            reply = send(body)
            sent.append(1)
            took.append(_took_ms(reply.body) / 1000.0)
            return reply

        def bulk(body: bytes) -> Any:
            if not per_record:
                return timed(body)
            lines = body.split(b"\n")[:-1]
            items = []
            for i in range(0, len(lines), 2):
                items.extend(json.loads(timed(lines[i] + b"\n" + lines[i + 1] + b"\n").body)["items"])
            return HttpReply(200, {}, json.dumps({"errors": False, "items": items}).encode())

        ports.bulk = bulk
        return ports

    aws.build_ports = build_ports
    handler.reset()


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed_batch(records: list[dict[str, Any]], engine_pid: int) -> dict[str, Any]:
    import gc

    gc.collect()
    engine = process_cpu(engine_pid)
    wall, cpu, emf = _invoke(records)
    return {"wall": wall, "cpu": cpu, "engine_cpu": process_cpu(engine_pid) - engine, "emf": emf}


def measure_batches(engine: Engine) -> dict[str, Any]:
    """BATCHES batches through the stream sync, then one through the per-record client, against the same node; each
    batch updates and deletes documents the batch before it inserted (make_batch)."""
    _configure(engine.endpoint)
    took: list[float] = []
    sent: list[int] = []
    _install_ports(False, took, sent)
    _invoke(make_batch(0))  # warm-up: lazy imports, connection, caches, the engine's compiled script
    runs, tooks = [], []
    for number in range(1, BATCHES + 1):
        took.clear()
        result = _timed_batch(make_batch(number), engine.pid)
        runs.append(result)
        tooks.append(sum(took))
        assert result["emf"]["DocumentsIndexed"] + result["emf"]["DocumentsDeleted"] == BATCH, result["emf"]
    took.clear()
    _install_ports(True, took, sent)
    sent.clear()
    try:
        baseline = _timed_batch(make_batch(BATCHES + 1), engine.pid)
    finally:
        from stream_sync import aws, handler

        aws.build_ports = _install_ports.__dict__["real"]
        handler.reset()
    return {
        "requests": statistics.median(r["emf"]["BulkRequests"] for r in runs),
        "wall": statistics.median(r["wall"] for r in runs),
        "took": statistics.median(tooks),
        "cpu_per_record": statistics.median(r["cpu"] for r in runs) / BATCH,
        "cpu_min_per_record": min(r["cpu"] for r in runs) / BATCH,
        "engine_cpu_per_record": statistics.median(r["engine_cpu"] for r in runs) / BATCH,
        "baseline_requests": len(sent),
        "baseline_wall": baseline["wall"],
        "baseline_took": sum(took),
        "baseline_cpu_per_record": baseline["cpu"] / BATCH,
        "baseline_engine_cpu_per_record": baseline["engine_cpu"] / BATCH,
    }


def _plain_body(records: list[dict[str, Any]]) -> str:
    """A plain correct implementation, for reference: boto3's TypeDeserializer, Decimal via `default`,
    json.dumps per line."""
    from boto3.dynamodb.types import TypeDeserializer
    from refdata import indexnames
    from search import indices

    deserializer = TypeDeserializer()

    def default(value: Any) -> Any:
        if isinstance(value, Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        if isinstance(value, set):
            return sorted(value)
        return str(value)

    lines = []
    for record in records:
        stream = record["dynamodb"]
        pk, sk = stream["Keys"]["pk"]["S"], stream["Keys"]["sk"]["S"]
        image = stream.get("NewImage")
        doc = {k: deserializer.deserialize(v) for k, v in image.items()} if image else {"pk": pk, "sk": sk}
        doc["schema"] = pk.split("::")[0]
        lines.append(
            json.dumps({"update": {"_index": indexnames.write_alias(doc["schema"]), "_id": f"{pk}#{sk}"}})
        )
        params = {"seq": stream["SequenceNumber"].zfill(40), "tombstone": image is None, "doc": doc}
        body = {
            "scripted_upsert": True,
            "upsert": {},
            "script": {"id": indices.APPLY_SCRIPT_ID, "params": params},
        }
        lines.append(json.dumps(body, default=default))
    return "\n".join(lines) + "\n"


def _fast_body(records: list[dict[str, Any]]) -> str:
    from search.documents import build_document, encode_update, parse_change

    parts = []
    for record in records:
        change = parse_change(record)
        build_document(change, None)
        parts.append(encode_update(change))
    return "".join(parts)


def measure_encoding() -> dict[str, float]:
    records = make_batch(90)
    _fast_body(records)
    _plain_body(records)
    fast, plain = [], []
    for _ in range(5):
        started = time.thread_time()
        _fast_body(records)
        fast.append(time.thread_time() - started)
        started = time.thread_time()
        _plain_body(records)
        plain.append(time.thread_time() - started)
    return {"fast": statistics.median(fast) / BATCH, "plain": statistics.median(plain) / BATCH}


def _import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    samples = []
    for _ in range(7):
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=LAMBDAS,
            env=_environment(),
        )
        samples.append(float(result.stdout))
    return statistics.median(samples)


def asset_size() -> tuple[int, int]:
    """Zipped and raw size of `lambdas/` without caches: what `Code.from_asset("lambdas")` ships."""
    buffer = io.BytesIO()
    raw = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(LAMBDAS.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                archive.write(path, path.relative_to(LAMBDAS).as_posix())
                raw += path.stat().st_size
    return len(buffer.getvalue()), raw


# --------------------------------------------------------------------------- memory under heavy geometry

MIB = 1024 * 1024
# (case, records, geometry object size in bytes or None for 2 KB items without geometry, invocations run at most)
# The 1 MB and 5 MB batches take many minutes to drain on a shared machine (parsing, validating and re-encoding
# 1 and 5 GB of GeoJSON in Python): `make bench` runs their first invocations, each the whole rest of the batch as
# Lambda redelivers it, and projects the rest; BENCH_SYNC_FULL_DRAIN=1 drains them to the end.
MEMORY_CASES: tuple[tuple[str, int, int | None, int], ...] = (
    ("1000 items of 2 KB", BATCH, None, 200),
    ("1000 records, 1 MB geometry each", BATCH, 1 * MIB, 3),
    ("1000 records, 5 MB geometry each", BATCH, 5 * MIB, 2),
    ("1000 records, 20 MB geometry each", BATCH, 20 * MIB, 200),
    ("1 record, 1.5 GiB geometry (larger than the function's memory)", 1, 1536 * MIB, 200),
)
# Objects the stand-in holds in memory to serve; larger ones it streams from a pattern (their bodies are never read).
_SERVED_IN_FULL = 16 * MIB

_STANDIN = """
import sys
from bench.sync import serve_standin
serve_standin()
"""
_MEMORY_CHILD = """
import json, sys
from bench.sync import memory_child
print(json.dumps(memory_child(json.loads(sys.argv[1]))), flush=True)
"""


def polygon_of_size(size: int) -> bytes:
    """A valid GeoJSON polygon of about `size` bytes, compact as the writers store it (refdata.offload)."""
    import math

    count = max(4, (size - 40) // 24)
    positions = [
        f"[{-123 + 0.5 * math.cos(2 * math.pi * i / count):.6f},{49 + 0.5 * math.sin(2 * math.pi * i / count):.6f}]"
        for i in range(count)
    ]
    positions.append(positions[0])
    return ('{"type":"Polygon","coordinates":[[' + ",".join(positions) + "]]}").encode()


def serve_standin() -> None:
    """S3 (GetObject of `geometries/<size>/<n>.geojson`: a polygon of that size), SQS (SendMessageBatch) and an
    OpenSearch `_bulk` that counts the updates, answers each as created and keeps nothing, on one loopback port;
    prints the endpoint, serves until stdin closes. The sync's real clients talk to it (botocore, the signed
    transport), so their buffers count in the measurement; the stand-in's own memory does not."""
    import hashlib
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: dict[int, bytes] = {}
    lock = threading.Lock()

    def body_of(size: int) -> bytes:
        with lock:
            if size not in bodies:
                bodies[size] = polygon_of_size(size)
            return bodies[size]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return

        def _reply(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # S3 GetObject /<bucket>/geometries/<size>/<n>.geojson
            parts = self.path.split("?")[0].strip("/").split("/")
            size = int(parts[2])
            if size <= _SERVED_IN_FULL:
                self._reply(200, body_of(size), "application/geo+json")
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/geo+json")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b" " * MIB
            try:
                for _ in range(size // MIB):
                    self.wfile.write(chunk)
            except OSError:  # the client closed the body unread, as it should
                self.close_connection = True

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path.startswith("/_bulk"):
                items = [{"update": {"status": 201, "result": "created"}}] * (body.count(b"\n") // 2)
                self._reply(200, json.dumps({"took": 0, "errors": False, "items": items}).encode())
                return
            if self.headers.get("X-Amz-Target") == "AmazonSQS.SendMessageBatch":
                entries = json.loads(body)["Entries"]
                done = [
                    {
                        "Id": entry["Id"],
                        "MessageId": f"m-{entry['Id']}",
                        "MD5OfMessageBody": hashlib.md5(entry["MessageBody"].encode()).hexdigest(),
                    }
                    for entry in entries
                ]
                self._reply(
                    200, json.dumps({"Successful": done, "Failed": []}).encode(), "application/x-amz-json-1.0"
                )
                return
            self._reply(400, b'{"error":"not served by the bench stand-in"}')

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            return  # a client that closed a body unread, as the sync does with an object over the cap

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


def memory_child(case: dict[str, Any]) -> dict[str, Any]:
    """One case in a fresh process: the batch delivered as Lambda delivers it (again from the reported record after
    a partial batch response) until every record is final, each invocation given the function's timeout by a real
    clock. The first invocation (the whole batch) runs under tracemalloc; the rest untraced. Returns the peaks."""
    import resource
    import tracemalloc

    endpoint = case["endpoint"]
    os.environ.update(
        {
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_ENDPOINT_URL_S3": endpoint,
            "AWS_ENDPOINT_URL_SQS": endpoint,
            "OPENSEARCH_ENDPOINT": endpoint,
            "DLQ_URL": f"{endpoint}/123456789012/bench-dlq",
            "GEOMETRY_BUCKET": "bench-geometry",
            "BULK_MAX_BYTES": str(case["bulk_max_bytes"]),
            "REQUEST_TIMEOUT_SECONDS": str(case["request_timeout_seconds"]),
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(case["memory_mb"]),
            "ENVIRONMENT_NAME": "bench",
            "SCHEMA_TABLES": json.dumps(
                {"geozone": "refdata", "productDate": "refdata", "booking": "bookings"}
            ),
        }
    )
    from stream_sync import handler

    records = make_batch(7, case["records"])
    if case["size"] is not None:
        for n, record in enumerate(records):
            stream = record["dynamodb"]
            stream.pop("OldImage", None)
            record["eventName"] = "INSERT"
            stream["NewImage"] = {
                **stream["Keys"],
                "name": {"S": f"zone {n}"},
                "geometryUrl": {"S": f"s3://bench-geometry/geometries/{case['size']}/{n}.geojson"},
            }
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    pending, invocations, failed, traced_peak = records, 0, 0, 0
    fates: dict[str, int] = {}
    started = time.perf_counter()
    while pending:
        invocations += 1
        deadline = time.monotonic() + case["timeout_seconds"]
        context = SimpleNamespace(
            get_remaining_time_in_millis=lambda d=deadline: (d - time.monotonic()) * 1000
        )
        out = io.StringIO()
        if invocations == 1:
            tracemalloc.start()
        try:
            with contextlib.redirect_stdout(out):
                response = handler.handler({"Records": pending}, context)
        except Exception:
            failed += 1
            response = {"batchItemFailures": [{"itemIdentifier": pending[0]["dynamodb"]["SequenceNumber"]}]}
        if invocations == 1:
            traced_peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        summary = next(
            (json.loads(line) for line in out.getvalue().splitlines() if '"batch synced"' in line), {}
        )
        for fate, ids in summary.get("recordIds", {}).items():
            if fate != "retry":
                fates[fate] = fates.get(fate, 0) + len(ids)
        failures = response["batchItemFailures"]
        if not failures:
            break
        start = next(
            i
            for i, r in enumerate(pending)
            if r["dynamodb"]["SequenceNumber"] == failures[0]["itemIdentifier"]
        )
        pending = pending[start:]
        if invocations >= case["max_invocations"]:
            break
    return {
        "records": len(records),
        "drained": not pending or not failures,
        "finished": sum(fates.values()),
        "invocations": invocations,
        "failed": failed,
        "fates": fates,
        "traced_peak": traced_peak,
        "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "rss_before": rss_before,
        "seconds": time.perf_counter() - started,
    }


def measure_memory() -> dict[str, Any]:
    """Every memory case in a process of its own, against the stand-in in another, with the shipped prod sizing."""
    from infra.environments import environments

    prod = environments()["prod"]
    sizing = {
        "memory_mb": prod.sync.memory_mb,
        "timeout_seconds": prod.sync.timeout_seconds,
        "request_timeout_seconds": prod.sync.request_timeout_seconds,
        "bulk_max_bytes": prod.search.bulk_max_bytes,
    }
    standin = subprocess.Popen(
        [sys.executable, "-c", _STANDIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env=_environment(),
    )  # fmt: skip
    results = {}
    try:
        assert standin.stdout is not None
        endpoint = standin.stdout.readline().strip()
        full = os.environ.get("BENCH_SYNC_FULL_DRAIN") == "1"
        for name, records, size, most in MEMORY_CASES:
            case = {
                **sizing,
                "endpoint": endpoint,
                "records": records,
                "size": size,
                "max_invocations": 200 if full else most,
            }
            print(f"  memory case: {name} ...", file=sys.stderr)
            child = subprocess.run(
                [sys.executable, "-c", _MEMORY_CHILD, json.dumps(case)],
                capture_output=True, text=True, check=True, cwd=ROOT, env=_environment(),
            )  # fmt: skip
            results[name] = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        assert standin.stdin is not None
        standin.stdin.close()
        standin.wait(timeout=30)
    return {"sizing": sizing, "cases": results}


def memory_section(memory: dict[str, Any]) -> str:
    from stream_sync.config import budget_for_memory, worst_batch_invocations

    sizing = memory["sizing"]
    memory_bytes = sizing["memory_mb"] * MIB
    half = memory_bytes / 2
    budget = budget_for_memory(sizing["memory_mb"])
    rows = []
    met = True
    for name, result in memory["cases"].items():
        within = max(result["traced_peak"], result["rss_peak"]) < half and result["failed"] == 0
        met = met and within
        fates = ", ".join(f"{count} {fate}" for fate, count in sorted(result["fates"].items()))
        if result["drained"]:
            invocations = f"{result['invocations']}"
        else:
            per = result["finished"] / result["invocations"]
            projected = -(-result["records"] // max(1, int(per)))
            invocations = f"{result['invocations']} run ({result['finished']} records final), about {projected} to drain"
        rows.append(
            f"| {name} | {result['traced_peak'] / MIB:.0f} MiB | {result['rss_peak'] / MIB:.0f} MiB "
            f"({result['rss_before'] / MIB:.0f} before) | {invocations} | {result['failed']} | {fates} | "
            f"{result['seconds']:.0f} s |"
        )
    table = "\n".join(rows)
    worst = worst_batch_invocations(BATCH, bulk_max_bytes=sizing["bulk_max_bytes"], work_budget_bytes=budget)
    return f"""### Memory under heavy geometry

Each case runs in a fresh process with prod's sizing: {sizing["memory_mb"]} MB of function memory (half of it:
{half / MIB:.0f} MiB), a {sizing["timeout_seconds"]} s timeout counted down by a real clock,
`BULK_MAX_BYTES` {sizing["bulk_max_bytes"] / MIB:.0f} MiB and so a work budget of {budget / MIB:.0f} MiB of held lines.
The handler is the real one with its real clients (botocore for S3 and SQS, the signed transport for `_bulk`)
against a stand-in in another process: S3 serving compact GeoJSON polygons of the case's size (larger objects
are streamed from a pattern and their bodies should never be read), SQS, and a `_bulk` that answers every update
as created and keeps nothing (a search engine would hold gigabytes of documents). The batch is
delivered as Lambda delivers it: after a partial batch response, again from the reported record (the 1 MB and 5 MB
batches for their first invocations only unless `BENCH_SYNC_FULL_DRAIN=1`: draining 1 and 5 GB of GeoJSON takes
long on a shared machine, and each later invocation repeats the first's pattern). *Python peak* is
tracemalloc's peak over the first invocation (the whole batch, all the handler allocates); *process peak* is the
process's peak resident memory over every invocation (interpreter, boto3, the event and tracemalloc's own
bookkeeping included), beside its value before the first invocation.

| case | Python peak (first invocation) | process peak | invocations | failed invocations | fates | wall time |
|---|---:|---:|---:|---:|---|---:|
{table}

Target: every peak below half the function's memory, and no failed invocation: {"met" if met else "**missed**"}.
The invocation counts are this machine's; the function at {sizing["memory_mb"]} MB has about 0.6 of a vCPU, so
expect up to about 1.7 times as many there (each is bounded by the timeout either way). The worst batch the
mapping can deliver ({BATCH} records, each naming an object at the bulk cap) takes at most {worst} invocations of one
work-budget slice each ({budget // sizing["bulk_max_bytes"]} objects), {worst * sizing["timeout_seconds"] / 3600:.1f} h at
the timeout, inside the 6-hour record age (docs/sync.md, *Memory and time*).
"""


def run() -> str:
    for path in (str(LAMBDAS), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    saved = dict(os.environ)
    try:
        with engine_node() as engine:
            batches = measure_batches(engine)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    memory = measure_memory()
    encoding = measure_encoding()
    from tests.support.engine_setup import HEAP

    handler_import = _import_seconds("stream_sync.handler")
    boto3_import = _import_seconds("boto3")
    zipped, raw = asset_size()
    sample = make_batch(99, 1)[0]
    try:
        size = f"{item_bytes(sample):,} bytes (DynamoDB item size)"
    except ImportError:
        size = "about 2 KB"
    speedup = batches["baseline_wall"] / batches["wall"]
    client_speedup = (batches["baseline_wall"] - batches["baseline_took"]) / (
        batches["wall"] - batches["took"]
    )
    cpu_us = batches["cpu_per_record"] * 1e6
    import_ratio = handler_import / boto3_import
    per_second = BATCH / batches["wall"]
    baseline_per_second = BATCH / batches["baseline_wall"]
    engine_us = batches["engine_cpu_per_record"] * 1e6
    baseline_engine_us = batches["baseline_engine_cpu_per_record"] * 1e6
    baseline_cpu_us = batches["baseline_cpu_per_record"] * 1e6

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    return f"""## Stream sync

Workload: {BATCH}-record batches in Lambda event format, 50% INSERT of new keys / 35% MODIFY / 15% REMOVE of
documents the batch before inserted, items of {size} (strings, numbers, a map, a list, a string set, a geo_point, a GeoJSON polygon kept
inline). The handler runs in-process with its real signed transport; the search side is the tests' engine, a real
OpenSearch node (tests/support/engine_node.py, one JVM with a {HEAP} heap, on loopback), started for this section
and bootstrapped by the product's index bootstrap; requests go straight to it (no front, no added latency), so every
document goes through the engine's own parsing, mapping, geo_shape indexing and the stored painless script. Median
of {BATCHES} batches after one warm-up batch. The baseline is a per-document client (one request per record, as the
AWS sample's sync does): the same handler whose bulk port sends every action as a request of its own, in the same
process against the same node, over one batch of the same mix. Engine CPU is the JVM's user + sys CPU over the
batch (indexing, the script, merges and refreshes that fall in it).

| measure | stream sync | one request per record | ratio | target |
|---|---:|---:|---:|---|
| HTTP requests per batch | {batches["requests"]:.0f} | {batches["baseline_requests"]:.0f} | {batches["baseline_requests"] / batches["requests"]:.0f}× fewer | 1 per 1,000 records: {verdict(batches["requests"] == 1)} |
| documents per second | {per_second:,.0f} | {baseline_per_second:,.0f} | {speedup:.1f}× faster | — |
| wall time per batch | {batches["wall"] * 1000:.0f} ms | {batches["baseline_wall"] * 1000:.0f} ms | {speedup:.1f}× faster | — |
| engine processing per batch (sum of `took`) | {batches["took"] * 1000:.0f} ms | {batches["baseline_took"] * 1000:.0f} ms | {batches["baseline_took"] / batches["took"]:.1f}× | — |
| wall time per batch minus engine processing | {(batches["wall"] - batches["took"]) * 1000:.0f} ms | {(batches["baseline_wall"] - batches["baseline_took"]) * 1000:.0f} ms | {client_speedup:.1f}× faster | — |
| handler CPU per record | {cpu_us:.1f} µs | {baseline_cpu_us:.1f} µs | {baseline_cpu_us / cpu_us:.1f}× less | — |
| engine CPU per record | {engine_us:.0f} µs | {baseline_engine_us:.0f} µs | {baseline_engine_us / engine_us:.1f}× less | — |

| measure | value | reference | target |
|---|---:|---:|---|
| handler CPU per record (thread CPU of the whole invocation: decode, encode, sign, send, parse reply, logs, metrics) | {cpu_us:.1f} µs (best batch {batches["cpu_min_per_record"] * 1e6:.1f} µs) | — | ≤ 50 µs: {verdict(cpu_us <= 50)} |
| record → bulk lines only, this implementation | {encoding["fast"] * 1e6:.1f} µs | plain implementation (TypeDeserializer, `json.dumps` with `default`): {encoding["plain"] * 1e6:.1f} µs ({encoding["plain"] / encoding["fast"]:.1f}×) | — |
| `import stream_sync.handler` (fresh interpreter) | {handler_import * 1000:.1f} ms | `import boto3`: {boto3_import * 1000:.1f} ms ({import_ratio:.2f}×) | ≤ 1.3× `import boto3`: {verdict(import_ratio <= 1.3)} |
| deployed asset (`lambdas/` zipped, no `__pycache__`) | {zipped / 1024:.1f} KiB | {raw / 1024:.1f} KiB unzipped | — |

Where the time goes: the node and this process share the machine's cores, so the engine's CPU per record is as much
a cost of the batch as the handler's. One bulk request lets the engine parse, index and run the script for a
thousand documents in one pass (one translog write, one reply); one request per record pays the HTTP exchange, the
request's own bookkeeping and translog write a thousand times. The earlier target of ≥ 50× was set
against the stand-in with 2 ms added to every request; on loopback to a real node no latency is added, so the
ratio here is what the request count costs with a near-zero network: against a domain each of the per-record
client's requests adds a network round trip the sync pays once.

The handler module imports no AWS SDK: boto3/botocore/urllib3 load on the first invocation that needs
them (the signed transport on the first batch, S3 and SQS only when a geometry or a dead letter needs them).

{memory_section(memory)}"""


if __name__ == "__main__":
    print(run())
