"""The ordering guarantee as a property: under any interleaving of writes, partial and repeated deliveries,
out-of-order replays, permanent item failures (dead letters) and redrives, every document always holds a
state its item really had at or after the document's label, and ends equal to DynamoDB."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from stream_sync.redrive import Message, redrive_messages
from stream_sync_fakes import PK, Harness, record, redelivery, run, settings

SORT_KEYS = ("a", "b", "c")

write = st.tuples(st.just("write"), st.sampled_from(SORT_KEYS), st.one_of(st.none(), st.integers(0, 9)))
deliver = st.tuples(st.just("deliver"), st.integers(0, 15), st.integers(1, 12))
poison = st.tuples(st.just("poison"), st.sampled_from(SORT_KEYS), st.sampled_from([400, 503]))
redrive = st.tuples(st.just("redrive"), st.just(""), st.just(0))
steps = st.builds(
    lambda first, rest: first + rest,
    st.lists(write, min_size=2, max_size=8),
    st.lists(st.one_of(write, deliver, deliver, poison, redrive), min_size=3, max_size=40),
)


class World:
    def __init__(self) -> None:
        self.harness = Harness()
        self.table: dict[str, dict[str, Any]] = {}
        self.stream: list[dict[str, Any]] = []
        self.history: dict[str, list[tuple[int, dict[str, Any] | None]]] = {sk: [] for sk in SORT_KEYS}
        self.seq = 100
        self.labels: dict[str, int] = {}

    def write(self, sk: str, value: int | None) -> None:
        self.seq += 7
        if value is None:
            self.table.pop(sk, None)
            self.stream.append(record("REMOVE", sk, self.seq))
        else:
            self.table[sk] = {"pk": {"S": PK}, "sk": {"S": sk}, "value": {"N": str(value)}}
            self.stream.append(record("MODIFY", sk, self.seq, {"value": {"N": str(value)}}))
        self.history[sk].append((self.seq, None if value is None else value))

    def deliver(self, records: list[dict[str, Any]]) -> None:
        pending = records
        for _ in range(10):  # what Lambda does with a partial batch response
            if not pending or not (failures := run(self.harness, pending).batch_item_failures()):
                return
            pending = redelivery(pending, failures)

    def redrive(self) -> None:
        letters = self.harness.dlq.sent
        messages = [Message(str(i), str(i), letter.body) for i, letter in enumerate(letters)]
        if not messages:
            return
        reports = redrive_messages(
            messages,
            settings=settings(),
            ports=self.harness.ports(),
            read_range=lambda *_: [],
            get_item=lambda keys, arn: self.table.get(keys["sk"]["S"]),
        )
        self.harness.dlq.sent = [letter for letter, r in zip(letters, reports, strict=True) if not r.deleted]

    def check_labels(self) -> None:
        """A document labelled s holds a state its item had at some sequence number >= s."""
        for sk in SORT_KEYS:
            doc = self.harness.opensearch.doc(sk)
            if doc is None:
                continue
            label = int(doc["stream_seq"])
            assert label >= self.labels.get(sk, 0), "a document's label went backwards"
            self.labels[sk] = label
            held = None if doc["tombstone"] else doc["value"]
            allowed = {value for seq, value in self.history[sk] if seq >= label}
            assert held in allowed, (sk, label, held, self.history[sk])

    def visible(self) -> dict[str, Any]:
        docs = {sk: self.harness.opensearch.doc(sk) for sk in SORT_KEYS}
        return {sk: doc["value"] for sk, doc in docs.items() if doc is not None and not doc["tombstone"]}

    def expected(self) -> dict[str, Any]:
        return {sk: int(item["value"]["N"]) for sk, item in self.table.items()}


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.lists(st.tuples(st.integers(0, 12), st.integers(1, 6)), max_size=6))
def test_any_interleaving_converges_and_never_goes_behind_a_label(
    plan: list[tuple[str, Any, Any]], late_replays: list[tuple[int, int]]
) -> None:
    world = World()
    for kind, first, second in plan:
        if kind == "write":
            world.write(first, second)
        elif kind == "deliver":
            world.deliver(world.stream[first : first + second])  # any slice, in any order, again and again
        elif kind == "poison":
            doc_id = f"{PK}#{first}"
            world.harness.opensearch.item_errors[doc_id] = [(second, "injected")]
        else:
            world.redrive()
        world.check_labels()
    # Lambda eventually gets through the whole shard; old batches may still be replayed after that; the
    # operator redrives the DLQ.
    world.harness.opensearch.item_errors.clear()
    world.deliver(world.stream)
    for start, length in late_replays:
        world.deliver(world.stream[start : start + length])
        world.check_labels()
    world.redrive()
    world.check_labels()
    assert world.harness.dlq.sent == []
    assert world.visible() == world.expected()
