"""cdk.json sets every feature flag aws-cdk-lib recommends, at the recommended value, as a new app would; the
docs/environments.md gives the reason for each deliberate deviation. (The pinned logical ids in test_logical_ids.py run with
these flags, so a flag that would replace a stateful resource fails there.)"""

from __future__ import annotations

import functools
import json
import tarfile
from pathlib import Path
from typing import Any

import aws_cdk

ROOT = Path(__file__).resolve().parents[2]
# Deliberate deviations from the recommended values; docs/environments.md, "Feature flags", says why.
DEVIATIONS = {"@aws-cdk/core:target-partitions": ["aws"]}


@functools.cache
def recommended_flags() -> dict[str, Any]:
    """The installed aws-cdk-lib's own recommended-feature-flags.json (what `cdk init` writes)."""
    (package,) = Path(aws_cdk.__file__).parent.joinpath("_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(package) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return json.load(member)  # type: ignore[no-any-return]


def configured_flags() -> dict[str, Any]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]  # type: ignore[no-any-return]


def test_every_recommended_flag_is_set_to_its_recommended_value() -> None:
    configured, recommended = configured_flags(), recommended_flags()
    differing = {
        flag: (configured.get(flag, "<unset>"), value)
        for flag, value in recommended.items()
        if configured.get(flag, "<unset>") != DEVIATIONS.get(flag, value)
    }
    assert differing == {}


def test_no_flag_is_set_that_the_library_does_not_recommend() -> None:
    assert set(configured_flags()) - set(recommended_flags()) == set()


def test_the_docs_give_the_reason_for_each_deviation() -> None:
    doc = (ROOT / "docs" / "environments.md").read_text()
    section = doc.split("\n## Feature flags\n", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{flag}`" in section for flag in DEVIATIONS)
