"""The smoke run's pure parts: its settings from the worker's environment, the verdict (the first failure, by step
and component, with its runbook section), and the report lines the deploy job shows."""

from __future__ import annotations

import json

import pytest
from ops.index import OpsError
from ops.smoke import PASS, STEPS, Reader, SmokeSettings, _verdict, render, runbook


def test_settings_read_the_mappings_readers_and_waits() -> None:
    readers = json.dumps([{"name": "public_search", "schemas": ["geozone"], "probeRoleArn": "arn:p"}])
    mappings = json.dumps({"refdata-table": "uuid-1"})
    environment = {"AWS_REGION": "ca-central-1", "EVENT_SOURCE_MAPPINGS": mappings, "SMOKE_READERS": readers}
    settings = SmokeSettings.from_env(environment | {"SMOKE_WAIT_SECONDS": "30"})
    assert settings.mappings == {"refdata-table": "uuid-1"}
    assert settings.readers == (Reader("public_search", ("geozone",), "arn:p"),)
    assert (settings.wait_seconds, settings.poll_seconds, settings.region) == (30.0, 1.0, "ca-central-1")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EVENT_SOURCE_MAPPINGS", "{not json"),
        ("SMOKE_READERS", '[{"name": "x"}]'),
        ("SMOKE_WAIT_SECONDS", "soon"),
    ],
)
def test_a_bad_setting_is_named(name: str, value: str) -> None:
    with pytest.raises(OpsError, match=rf"^{name}"):
        SmokeSettings.from_env({"AWS_REGION": "ca-central-1", name: value})


def target(schema: str, failure: dict | None = None, left: list[str] | None = None) -> dict:
    outcome = {"failure": failure, "left": left or [], "passed": not failure}
    return {"schema": schema, "table": "t", "steps": {step: 0.1 for step in STEPS}} | outcome


def test_the_verdict_names_the_first_failing_step_its_component_and_what_to_do() -> None:
    failure = {"step": "indexed", "component": "stream not flowing", "reason": "the mapping is Disabled"}
    later = {**failure, "step": "updated"}
    verdict = _verdict([target("a"), target("b", failure), target("c", later)], [], None)
    assert verdict == (
        "FAILED at indexed (stream not flowing): the mapping is Disabled "
        "[schema b, table t; what to do: docs/runbook.md#smoke-stream-not-flowing]"
    )
    assert runbook("reader leak") == "docs/runbook.md#smoke-reader-leak"


def test_anything_left_behind_or_a_run_error_fails_the_verdict_and_a_clean_run_passes() -> None:
    assert _verdict([target("a"), target("b")], [], None) == PASS
    assert _verdict([target("a", left=["item x"])], [], None) == "FAILED at cleanup (left behind): item x"
    assert _verdict([target("a")], ["document y"], None) == "FAILED at cleanup (left behind): document y"
    assert _verdict([target("a")], [], "prepare: boom") == "FAILED (smoke run): prepare: boom"
    assert _verdict([{**target("a"), "steps": {}}], [], None) == "FAILED (smoke run): no canary ran for a"


def test_the_report_shows_each_canarys_steps_and_the_verdict() -> None:
    summary = {"targets": [target("geozone")], "verdict": PASS}
    lines = render(summary).splitlines()
    assert lines[0].startswith("ok     geozone (t): write 0.10 s · indexed 0.10 s")
    assert lines[-1] == "verdict: pass"


class SampledQueue:
    """SQS as its short polling behaves: a receive with no wait samples a subset of the servers, here none that
    hold the letter; a long poll (any wait above 0 s) asks them all."""

    def __init__(self, bodies: list[dict[str, str]]) -> None:
        self.messages = [
            {"MessageId": str(i), "ReceiptHandle": f"r{i}", "Body": json.dumps(b)}
            for i, b in enumerate(bodies)
        ]
        self.deleted: list[str] = []
        self.hidden: set[str] = set()

    def receive_message(self, **request: object) -> dict[str, object]:
        if not request["WaitTimeSeconds"]:
            return {}
        visible = [m for m in self.messages if m["ReceiptHandle"] not in self.hidden | set(self.deleted)]
        batch = visible[: int(str(request["MaxNumberOfMessages"]))]
        self.hidden |= {m["ReceiptHandle"] for m in batch}
        return {"Messages": batch}

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> None:
        self.deleted.append(ReceiptHandle)

    def change_message_visibility_batch(
        self, QueueUrl: str, Entries: list[dict[str, object]]
    ) -> dict[str, object]:
        self.hidden -= {str(e["ReceiptHandle"]) for e in Entries}
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


def test_clearing_a_canarys_dead_letters_long_polls_so_a_sampled_empty_answer_does_not_hide_them() -> None:
    from types import SimpleNamespace

    from ops.smoke import remove_dead_letters

    queue = SampledQueue([{"documentId": "canary#1"}, {"documentId": "other#2"}])

    left = remove_dead_letters(SimpleNamespace(sqs=queue, dlq_url="dlq"), ["canary#1"])  # type: ignore[arg-type]

    assert left == [] and queue.deleted == ["r0"]
    # the other letter is visible again at once, for the redrive
    assert queue.hidden - set(queue.deleted) == set()
