"""Index and alias names: lower case, the schema's own versions only, names OpenSearch would refuse refused."""

from __future__ import annotations

import pytest
from refdata.indexnames import (
    index_name,
    index_pattern,
    index_version,
    read_alias,
    template_name,
    write_alias,
)
from refdata.registry import indexable_schemas


def test_names_follow_the_contract_in_lower_case() -> None:
    assert index_name("productDate", 3) == "productdate-v3"
    assert read_alias("productDate") == "productdate"
    assert write_alias("productDate") == "productdate-write"
    assert template_name("productDate") == "productdate-template"
    assert index_pattern("productDate") == "productdate-v*"


def test_every_indexable_schema_has_a_valid_index_name() -> None:
    for schema in indexable_schemas():
        name = index_name(schema.name, 1)
        assert name == name.lower()
        assert index_version(schema.name, name) == 1


@pytest.mark.parametrize("bad", ["", "_hidden", "a b", "geo#zone", "a/b", "a*"])
def test_names_that_opensearch_would_refuse_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        index_name(bad, 1)


def test_versions_start_at_one() -> None:
    with pytest.raises(ValueError):
        index_name("geozone", 0)


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("geozone-v12", 12),
        ("geozone-write", None),
        ("geozone-v0", None),
        ("geozone-v1-old", None),
        ("geo-v1", None),
    ],
)
def test_index_version_reads_only_the_schemas_own_versions(name: str, version: int | None) -> None:
    assert index_version("geozone", name) == version
