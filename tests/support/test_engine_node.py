"""The test session's search engine: the version config names, installed from the lock, wiped between tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.environments import environments
from tests.support import engine_setup
from tests.support.engine_node import EngineNode
from tests.support.engine_setup import EngineSetupError, java_home, read_lock, verified_install


def test_engine_is_the_version_every_environment_configures(engine: EngineNode) -> None:
    root = engine.request("GET", "/").body
    major, minor = root["version"]["number"].split(".")[:2]
    assert root["version"]["distribution"] == "opensearch"
    for name, config in environments().items():
        assert config.search.engine_version == f"OpenSearch_{major}.{minor}", name


def test_engine_runs_from_exactly_the_locked_jars() -> None:
    locked = read_lock()
    assert locked, "engine.lock names no jar"
    assert verified_install(locked), "`make engine` installs the locked jars; .cache/engine/lib differs"
    engine_version = {jar.version for jar in locked if jar.group == "org.opensearch"}
    assert len(engine_version) == 1, f"one engine version, found {engine_version}"


def test_engine_starts_from_its_class_archive_or_records_it(engine: EngineNode) -> None:
    assert engine.class_archive_problem() is None


def test_a_class_archive_is_stale_once_a_jar_changes(tmp_path: Path) -> None:
    kind = engine_setup.NodeKind("scratch node", engine_setup.ENGINE_DIR, "engine.lock", tmp_path)
    (tmp_path / "lib").mkdir()
    jar = tmp_path / "lib" / "a.jar"
    jar.write_bytes(b"1")
    kind.jar.write_bytes(b"launcher")
    assert not kind.archive_is_current()  # none recorded
    kind.archive.write_bytes(b"archive")
    kind.archive_key.write_text(kind.key())
    assert kind.archive_is_current()
    jar.write_bytes(b"22")
    assert not kind.archive_is_current()


def test_wipe_removes_what_a_test_made(engine: EngineNode) -> None:
    engine.request("PUT", "/_component_template/left", {"template": {"settings": {"number_of_replicas": 0}}})
    template = {"index_patterns": ["left-*"], "template": {}, "composed_of": ["left"]}
    assert engine.request("PUT", "/_index_template/left", template).status == 200
    engine.request("PUT", "/left-1", {"aliases": {"left": {}}})
    engine.request("PUT", "/_scripts/left", {"script": {"lang": "painless", "source": "ctx._source.x = 1"}})
    engine.request("PUT", "/_cluster/settings", {"persistent": {"action.auto_create_index": "false"}})
    opened = engine.request("POST", "/left-1/_search/point_in_time?keep_alive=1m")
    assert opened.status == 200, opened.body

    engine.wipe()

    assert engine.request("GET", "/_cat/indices/left*?format=json").body == []
    assert engine.request("GET", "/_index_template/left").status == 404
    assert engine.request("GET", "/_component_template/left").status == 404
    assert engine.request("GET", "/_scripts/left").body["found"] is False
    settings = engine.request("GET", "/_cluster/settings").body
    assert settings == {"persistent": {}, "transient": {}}
    assert engine.request("GET", "/_search/point_in_time/_all").body["pits"] == []


def _build(engine: EngineNode, runs: list[str]) -> None:
    """A deployment's kind of set-up: a template, a versioned index behind two aliases, a stored script."""
    runs.append("built")
    mapped = {"mappings": {"properties": {"name": {"type": "text"}}}}
    engine.request("PUT", "/_index_template/kept", {"index_patterns": ["kept-v*"], "template": mapped})
    engine.request("PUT", "/kept-v1", {"aliases": {"kept": {}, "kept-write": {"is_write_index": True}}})
    settings, mappings = {"index": {"number_of_replicas": 0}}, {"properties": {"n": {"type": "long"}}}
    engine.request("PUT", "/other-v1", {"settings": settings, "mappings": mappings})
    engine.request("PUT", "/_scripts/kept", {"script": {"lang": "painless", "source": "ctx._source.x = 1"}})


def _state(engine: EngineNode) -> list[object]:
    """What a test sees of the set-up: indices with their mappings, settings and aliases, documents, templates."""
    indices = engine.request("GET", "/kept-v*,other-v*").body
    for index in indices.values():
        for made in ("uuid", "creation_date", "version"):
            index["settings"]["index"].pop(made)
    engine.request("POST", "/_refresh")
    counts = engine.request("GET", "/_cat/indices?format=json&h=index,docs.count").body
    template = engine.request("GET", "/_index_template/kept").body
    script = engine.request("GET", "/_scripts/kept").body
    pits = engine.request("GET", "/_search/point_in_time/_all").body["pits"]
    return [indices, sorted(counts, key=lambda row: row["index"]), template, script, pits]


def test_prepared_gives_each_test_what_its_build_made_whatever_the_test_before_did(
    engine: EngineNode,
) -> None:
    runs: list[str] = []
    assert engine.prepared("kept", lambda: _build(engine, runs)) is True
    made = _state(engine)
    assert [row["docs.count"] for row in made[1]] == ["0", "0"]

    # A test writes documents (one maps a new field, one not: only its document goes), moves the aliases to an
    # index it makes, opens a point in time.
    engine.request("PUT", "/kept-write/_doc/1", {"name": "a", "added": 1.5})
    engine.request("PUT", "/other-v1/_doc/1?refresh=true", {"n": 1})
    engine.request("PUT", "/kept-v2", {})
    moves = [
        {"remove": {"index": "kept-v1", "alias": "kept-write"}},
        {"add": {"index": "kept-v2", "alias": "kept"}},
    ]
    engine.request("POST", "/_aliases", {"actions": moves})
    engine.request("POST", "/other-v1/_search/point_in_time?keep_alive=1m")
    assert _state(engine) != made

    assert engine.prepared("kept", lambda: _build(engine, runs)) is False
    assert _state(engine) == made and runs == ["built"]

    # Anything else a test changes, or another key, and the build runs again on a wiped node.
    script = {"script": {"lang": "painless", "source": "ctx._source.x = 2"}}
    for method, path, body, key in (
        ("PUT", "/_scripts/kept", script, "kept"),
        ("PUT", "/_cluster/settings", {"persistent": {"search.max_buckets": 100}}, "kept"),
        ("GET", "/", None, "another"),
    ):
        assert engine.request(method, path, body).status == 200
        assert engine.prepared(key, lambda: _build(engine, runs)) is True
        assert _state(engine) == made
    assert runs == ["built"] * 4
    assert engine.request("GET", "/_cluster/settings").body == {"persistent": {}, "transient": {}}

    engine.wipe()  # what the `engine` fixture does: the next prepared builds
    assert engine.prepared("another", lambda: _build(engine, runs)) is True


def _jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "javac").touch()
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


def test_java_home_is_taken_when_it_is_21_or_newer(tmp_path: Path) -> None:
    configured = _jdk(tmp_path / "elsewhere", "jdk", "21.0.4")
    _jdk(tmp_path / "jvm", "newer", "25.0.1")
    assert java_home({"JAVA_HOME": str(configured)}, tmp_path / "jvm") == configured


def test_the_newest_jdk_21_plus_is_found_when_java_home_is_older(tmp_path: Path) -> None:
    old = _jdk(tmp_path / "jvm", "old", "17.0.15")
    _jdk(tmp_path / "jvm", "mid", "21.0.4")
    newest = _jdk(tmp_path / "jvm", "newest", "25.0.1")
    assert java_home({"JAVA_HOME": str(old)}, tmp_path / "jvm") == newest


def test_no_jdk_21_is_an_error_naming_java_home(tmp_path: Path) -> None:
    old = _jdk(tmp_path / "jvm", "old", "17.0.15")
    with pytest.raises(EngineSetupError, match=r"JAVA_HOME=.*is not a JDK 21\+"):
        java_home({"JAVA_HOME": str(old)}, tmp_path / "jvm")
    with pytest.raises(EngineSetupError, match="JAVA_HOME is not set"):
        java_home({}, tmp_path / "jvm")


def test_the_lock_round_trips(tmp_path: Path) -> None:
    locked = read_lock()
    engine_setup.write_lock(locked, tmp_path / "engine.lock")
    assert read_lock(tmp_path / "engine.lock") == sorted(locked)


def test_engine_runs_what_the_platform_uses(engine: EngineNode) -> None:
    """geo_shape (spatial4j and JTS), painless, _reindex and _delete_by_query (the reindex module)."""
    mappings = {"properties": {"geometry": {"type": "geo_shape"}, "n": {"type": "double"}}}
    for name in ("probe", "copy"):
        assert engine.request("PUT", f"/{name}", {"mappings": mappings}).status == 200
    square = {
        "type": "Polygon",
        "coordinates": [[[-123, 49], [-122, 49], [-122, 50], [-123, 50], [-123, 49]]],
    }
    indexed = engine.request("PUT", "/probe/_doc/1?refresh=true", {"geometry": square, "n": 1})
    assert indexed.status == 201, indexed.body
    script = {"lang": "painless", "source": "ctx._source.n = ctx._source.n + params.by", "params": {"by": 2}}
    updated = engine.request("POST", "/probe/_update/1?refresh=true", {"script": script})
    assert updated.status == 200, updated.body
    copy = {"source": {"index": "probe"}, "dest": {"index": "copy"}}
    copied = engine.request("POST", "/_reindex?refresh=true", copy)
    assert copied.body["created"] == 1, copied.body
    point = {"geo_shape": {"geometry": {"shape": {"type": "point", "coordinates": [-122.5, 49.5]}}}}
    found = engine.request("POST", "/copy/_search", {"query": point}).body
    assert [hit["_source"]["n"] for hit in found["hits"]["hits"]] == [3]
    deleted = engine.request("POST", "/probe/_delete_by_query?refresh=true", {"query": {"match_all": {}}})
    assert deleted.body["deleted"] == 1, deleted.body
