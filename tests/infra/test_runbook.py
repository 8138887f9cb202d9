"""docs/runbook.md has a section for every alarm any environment synthesizes, and only for those.

Each alarm's description links ``docs/runbook.md#<anchor>``; the anchor must be a section heading named after the
alarm's kind (``refdata-<env>-<Kind>[-<subject>]``). Each section says what the alarm means, what to look at first
and what to do, with something to run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.infra.conftest import ENVIRONMENTS, Synthesized

RUNBOOK = Path(__file__).resolve().parents[2] / "docs" / "runbook.md"
LINK = re.compile(r" Runbook: docs/runbook\.md#([a-z0-9-]+)$")
PARTS = ("**What it means.**", "**Look first.**", "**Do.**")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def alarm_sections(text: str) -> dict[str, str]:
    """Level-3 heading -> its text, for every section under a level-2 heading other than the set-up ones."""
    sections: dict[str, str] = {}
    for block in re.split(r"^(?=### )", text, flags=re.MULTILINE)[1:]:
        heading, _, body = block.partition("\n")
        sections[heading.removeprefix("### ").strip()] = re.split(r"^## ", body, flags=re.MULTILINE)[0]
    return sections


def synthesized_alarms(synthesized: Synthesized) -> list[tuple[str, str, str]]:
    """(environment, alarm name, description) of every alarm and composite alarm of every environment."""
    found = []
    for env in ENVIRONMENTS:
        resources = synthesized.template_json(env, "Stateless")["Resources"]
        for resource in resources.values():
            if resource["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm"):
                properties = resource["Properties"]
                found.append((env, properties["AlarmName"], properties["AlarmDescription"]))
    return found


def kind(env: str, alarm_name: str) -> str:
    return alarm_name.removeprefix(f"refdata-{env}-").split("-")[0]


@pytest.fixture(scope="module")
def sections() -> dict[str, str]:
    return alarm_sections(RUNBOOK.read_text())


def test_every_alarm_links_the_section_named_after_it(
    synthesized: Synthesized, sections: dict[str, str]
) -> None:
    headings = {anchor(heading): heading for heading in sections}
    missing = []
    for env, name, description in synthesized_alarms(synthesized):
        link = LINK.search(description)
        target = headings.get(link.group(1)) if link else None
        if target != kind(env, name):
            missing.append(f"{name}: links {link.group(1) if link else 'nothing'}, section {target!r}")
    assert not missing, "alarms without their runbook section:\n" + "\n".join(missing)


def test_every_section_names_an_alarm_some_environment_has(
    synthesized: Synthesized, sections: dict[str, str]
) -> None:
    kinds = {kind(env, name) for env, name, _ in synthesized_alarms(synthesized)}
    assert sorted(set(sections) - kinds) == []


def test_every_section_says_what_it_means_what_to_look_at_and_what_to_run(sections: dict[str, str]) -> None:
    incomplete = {
        heading: [part for part in PARTS if part not in body] + ([] if "```sh" in body else ["a command"])
        for heading, body in sections.items()
    }
    assert {heading: gaps for heading, gaps in incomplete.items() if gaps} == {}


def test_anchor_follows_github_headings() -> None:
    assert anchor("ClusterStatusRed") == "clusterstatusred"
    assert anchor("What is not alarmed, and why") == "what-is-not-alarmed-and-why"


def test_sections_are_read_from_level_three_headings_only() -> None:
    text = "# Title\n## Part\n### KindA\nbody a\n## Other part\nintro\n### KindB\nbody b\n"
    assert alarm_sections(text) == {"KindA": "body a\n", "KindB": "body b\n"}
