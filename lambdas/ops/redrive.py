"""The DLQ redrive as a workflow: several consumers drain the stream sync's dead-letter queue at once, each
message redriven exactly as `stream_sync.redrive` does (current state re-read from DynamoDB, labelled with the
dead-lettered sequence number, deleted only when every record it names is final).

A part is one consumer; a page is one receive of up to ten messages. A consumer stops when a receive comes back
empty. Messages that stay (still failing) are hidden for `VISIBILITY_TIMEOUT` seconds, longer than a run takes,
so one run tries each message once; the next run tries them again. A dry run uses one consumer that only
describes the messages and makes them visible again, stopping at the first batch with nothing new.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from stream_sync.redrive import Message, handle_batch, item_reader, receive, release, stream_range_reader
from stream_sync.sync import Ports

from ops.index import OpsError
from ops.runs import Merged, PartState, Run
from ops.workflow import DONE, FAILED, WORK_LEFT, Env

VISIBILITY_TIMEOUT: Final = 3600
MESSAGES_PER_CONSUMER: Final = 50  # below this many messages per consumer, fewer consumers start


class Redrive:
    name = "redrive"

    def prepare(self, env: Env, run: Run, request: Mapping[str, Any]) -> dict[str, Any]:
        if not env.dlq_url:
            raise OpsError("no dead-letter queue to redrive (DLQ_URL)")
        attributes = env.sqs.get_queue_attributes(
            QueueUrl=env.dlq_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        depth = int(attributes.get("ApproximateNumberOfMessages", 0))
        dry_run = bool(request.get("dryRun", False))
        consumers = 1 if dry_run else max(1, min(env.segments, math.ceil(depth / MESSAGES_PER_CONSUMER)))
        record = {
            "operation": self.name,
            "runId": run.run_id,
            "queueUrl": env.dlq_url,
            "dryRun": dry_run,
            "startedAt": env.now(),
            "source": "none",
            "expectedItems": depth,
            "parts": [{"kind": "consumer", "number": n} for n in range(consumers)],
        }
        run.save_record(record)
        return record

    def pages(self, env: Env, run: dict[str, Any], state: PartState) -> Iterator[tuple[Any, Any]]:
        """A consumer has no position in the queue to resume from: its cursor counts the receives it made (a dry
        run's, the messages it described)."""
        seen: list[str] = list(state.cursor or []) if run["dryRun"] else []
        receives = state.cursor if isinstance(state.cursor, int) else 0
        while True:
            messages = receive(
                env.sqs, run["queueUrl"], 10, visibility_timeout=VISIBILITY_TIMEOUT, wait_seconds=1
            )
            if not run["dryRun"]:
                if not messages:
                    return
                receives += 1
                yield messages, receives
                continue
            fresh = [m for m in messages if m.message_id not in seen]
            release(env.sqs, run["queueUrl"], [m for m in messages if m.message_id in seen])
            if not fresh:  # the queue holds nothing this dry run has not described
                return
            seen.extend(m.message_id for m in fresh)
            yield fresh, list(seen)

    def process(
        self, env: Env, run: dict[str, Any], state: PartState, page: Sequence[Message], ports: Ports
    ) -> None:
        reports = handle_batch(
            page,
            queue_url=run["queueUrl"],
            sqs=env.sqs,
            settings=env.settings,
            ports=ports,
            read_range=stream_range_reader(env.streams),
            get_item=item_reader(env.dynamodb, env.tables),
            dry_run=run["dryRun"],
        )
        state.items += len(reports)
        for report in reports:
            state.counts[f"records:{'named' if run['dryRun'] else 'redriven'}"] += report.records
            for fate, count in report.fates.items():
                state.counts[f"fates:{fate}"] += count
            if run["dryRun"]:
                continue
            state.counts["messages:redriven" if report.deleted else "messages:left"] += 1
            if not report.deleted:
                state.fail(
                    {"messageId": report.message_id, "records": report.records, "reason": report.error}
                )

    def finish(self, env: Env, run: dict[str, Any], merged: Merged, error: str | None) -> dict[str, Any]:
        messages = merged.section("messages")
        summary: dict[str, Any] = {
            "command": self.name,
            "dryRun": run.get("dryRun", False),
            "queueDepthAtStart": run.get("expectedItems"),
            "messages": merged.items,
            "redriven": messages.get("redriven", 0),
            "leftInQueue": messages.get("left", 0),
            "records": merged.section("records"),
            "fates": merged.section("fates"),
            "left": merged.failures,
            "errors": merged.errors,
        }
        if error or "queueUrl" not in run:
            return summary | {"status": FAILED}
        return summary | {"status": DONE if merged.finished and not summary["leftInQueue"] else WORK_LEFT}
