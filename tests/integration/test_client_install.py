"""refdata-client as an application team uses it: the wheel `make client` builds, installed into a fresh virtual
environment with nothing of this repository on its path, runs the example of docs/client.md as written. Its writes
go through the writer to moto (served over HTTP from this process, so the stream the sync reads is the one written);
the real sync handler indexes them into the loopback search domain; the reads run as a read role through the reader.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from tests.integration.sync_harness import (
    BOOKINGS,
    BUCKET,
    READER_KEY,
    REGION,
    SCHEMA_TABLES,
    TABLE,
    Pipeline,
)
from tests.support import client

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "client.md"
BLOCK = re.compile(r"<!-- example: (\w+) -->\n```python\n(.*?)```", re.S)
OUTPUT = re.compile(r"<!-- example-output -->\n```text\n(.*?)```", re.S)


def example() -> dict[str, str]:
    """The guide's example blocks by name (configure, write, read)."""
    return dict(BLOCK.findall(GUIDE.read_text()))


@pytest.fixture(scope="module")
def team_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its `aws` extra at the lock's versions, nothing else.

    Offline and without resolving: the extra's closure comes from the lock with its hashes, so the install needs
    only the wheels the set-up fetched (a machine whose caches were empty before `make test` passes too)."""
    directory = tmp_path_factory.mktemp("team")
    venv, locked = directory / "venv", directory / "requirements.txt"
    locked.write_text(client.locked_closure("aws"))
    uv = ROOT / ".venv" / "bin" / "uv"
    subprocess.run([uv, "venv", "--quiet", "--python", os.path.realpath(sys.executable), venv], check=True)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "--quiet", "--offline", "--no-deps", "--python", python]
    subprocess.run([*install, "--require-hashes", "--requirement", locked], check=True)
    subprocess.run([*install, client.wheel()], check=True)
    # Nothing the wheel or its dependencies require is missing or at another version.
    subprocess.run([uv, "pip", "check", "--quiet", "--python", python], check=True)
    return python


@pytest.fixture
def moto_endpoint(pipeline: Pipeline) -> Iterator[str]:
    """moto over HTTP, serving the same in-process state the pipeline's tables, stream and bucket live in."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def varying(output: str) -> str:
    """The output with what changes from run to run (a fresh UUID, the shard it picks) as the guide writes it."""
    output = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", output)
    return re.sub(r"^(wrote booking::[^:]+)::[0-9]+ ", r"\1::<shard> ", output, flags=re.M)


def run(python: Path, code: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([python, "-c", code], env=env, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def team_environment(pipeline: Pipeline, moto_endpoint: str) -> dict[str, str]:
    """What the application's process would have: its role's credentials (this one is a read role's, which the
    loopback domain maps by access key), its region, and the stack outputs the guide names."""
    return {
        "PATH": os.environ["PATH"],
        "AWS_ACCESS_KEY_ID": READER_KEY,
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_ENDPOINT_URL": moto_endpoint,  # DynamoDB and S3 are moto's
        "REFDATA_SCHEMA_TABLES": json.dumps(SCHEMA_TABLES),
        "REFDATA_GEOMETRY_BUCKET": BUCKET,
        "REFDATA_SEARCH_ENDPOINT": pipeline.server.endpoint,
    }


def test_the_package_is_the_wheel_alone(team_python: Path, tmp_path: Path) -> None:
    where = run(team_python, "import refdata, sys; print(refdata.__file__); print(sys.path)", {}, tmp_path)
    assert where.splitlines()[0].startswith(str(team_python.parent.parent))
    assert str(ROOT) not in where


def test_the_guides_example_writes_syncs_and_reads_back_as_a_team_runs_it(
    team_python: Path, pipeline: Pipeline, moto_endpoint: str, tmp_path: Path
) -> None:
    blocks = example()
    env = team_environment(pipeline, moto_endpoint)
    wrote = run(team_python, blocks["configure"] + blocks["write"], env, tmp_path)
    assert wrote.count("wrote ") == 3, wrote

    for table in (TABLE, BOOKINGS):
        fates, _ = pipeline.deliver(pipeline.read_stream(table))
        assert "dead-lettered" not in fates.values(), fates
    pipeline.assert_index_equals_dynamodb()

    printed = run(team_python, blocks["configure"] + blocks["read"], env, tmp_path)
    lines = printed.splitlines()
    assert lines[0].startswith("found geozone {'collectionId': 'bcparks_1', 'seq': 1} Alpine Meadow ")
    assert " 1234.567890123456789 Polygon" in lines[0]  # digit for digit, and the geometry
    assert lines[1] == "near ['Alpine Meadow']"
    assert lines[2] == "product 2026-07-01 Lake day pass 12.5"
    (shown,) = OUTPUT.findall(GUIDE.read_text())
    assert shown == varying(wrote + printed), "docs/client.md shows other output than the example prints"
