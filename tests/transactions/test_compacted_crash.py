"""A compacted transactional topic through kill -9 restarts and cleanings (issue 28, done-when 3).

The model: every record written at its offset, with the outcome of its transaction (committed, aborted) or none
(an idempotent producer's record). Each cycle commits one transaction, aborts one, leaves a third open and kills
the broker (SIGKILL, tidelog.testing.BrokerProcess); after the restart the coordinator aborts the open one (by its
timeout, or when the same transactional id initialises again), so its ABORT marker is written after the restart,
in a later segment than its records. Segments are small (2,000 bytes), the cleaner runs every 100 ms,
delete.retention.ms is 500 ms and producers expire after 3 s, so the cleaner removes aborted records, then
markers, while the test goes on; at the end it writes until every marker outside the active segment is gone.

After every cycle and every round of the final phase, read_committed (a raw Fetch filtered as a Kafka consumer
filters, and confluent-kafka's consumer) must show only committed records, each the model's at its offset, and
the last value read per key must be the key's latest committed value.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from tests.broker.broker_testlib import create_topic, fetch, partition_data
from tidelog.protocol.record_batch import iter_batches
from tidelog.testing import BrokerProcess, KafkaWire

from .clients_lib import read_all
from .wire_lib import add_partitions, consume, end_txn, init, produce_records

TOPIC = "crash-compact"
KEYS = [b"k%d" % i for i in range(8)]
CYCLES = 4
TIMEOUT_ABORT_MS = 1000  # the transaction the kill leaves open
OVERRIDES = {
    "transaction.state.log.num.partitions": 1,
    "offsets.topic.num.partitions": 1,
    "log.cleaner.backoff.ms": 100,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    "producer.id.expiration.ms": 3000,
    "producer.id.expiration.check.interval.ms": 500,
}
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "2000", "delete.retention.ms": "500",
                "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}


class Model:
    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, bytes | None, str]] = {}  # offset -> (key, value, outcome)
        self.markers: dict[int, bool] = {}  # offset -> commit
        self.leo = 0

    def latest_committed(self) -> dict[bytes, bytes | None]:
        latest: dict[bytes, bytes | None] = {}
        for offset in sorted(self.records):
            key, value, outcome = self.records[offset]
            if outcome != "aborted":
                latest[key] = value
        return latest


class Writer:
    """Transactions and idempotent batches over raw requests; the model follows every acknowledged write."""

    def __init__(self, broker: BrokerProcess, model: Model, rng: random.Random) -> None:
        self.broker, self.model, self.rng = broker, model, rng
        self.wire = KafkaWire(broker.bootstrap, client_id="crash-writer", timeout=60)
        self.idempotent = init(self.wire, None)
        self.idempotent_seq = 0
        self.counter = 0

    def reconnect(self) -> None:
        self.wire.close()
        self.wire = KafkaWire(self.broker.bootstrap, client_id="crash-writer", timeout=60)
        self.idempotent, self.idempotent_seq = init(self.wire, None), 0

    def batch(self, tag: str, keys: list[bytes] | None = None) -> list[tuple[bytes, bytes | None]]:
        out: list[tuple[bytes, bytes | None]] = []
        for key in keys or self.rng.sample(KEYS, self.rng.randint(1, 4)):
            self.counter += 1
            out.append((key, f"{key.decode()}|{tag}|{self.counter}|".encode().ljust(self.rng.randint(20, 300), b".")))
        return out

    def _append(self, records: list[tuple[bytes, bytes | None]], pid: int, epoch: int, seq: int,
                tid: str | None) -> int:
        resp = produce_records(self.wire, TOPIC, 0, records, int(time.time() * 1000), pid, epoch, seq, tid)
        assert resp.error_code == 0 and resp.base_offset == self.model.leo, (resp, self.model.leo)
        for i, (key, value) in enumerate(records):
            self.model.records[self.model.leo + i] = (key, value, "open" if tid else "plain")
        self.model.leo += len(records)
        return resp.base_offset

    def transaction(self, tid: str, batches: int, timeout_ms: int = 60000) -> tuple[int, int, list[int]]:
        """Begin and write `batches` batches; returns (producer id, epoch, offsets of its records)."""
        r = init(self.wire, tid, timeout_ms=timeout_ms)
        assert add_partitions(self.wire, tid, r.producer_id, r.producer_epoch, TOPIC, [0]) == {(TOPIC, 0): 0}
        offsets: list[int] = []
        seq = 0
        for _ in range(batches):
            records = self.batch(tid)
            base = self._append(records, r.producer_id, r.producer_epoch, seq, tid)
            offsets += range(base, base + len(records))
            seq += len(records)
        return r.producer_id, r.producer_epoch, offsets

    def end(self, tid: str, pid: int, epoch: int, offsets: list[int], commit: bool) -> None:
        assert end_txn(self.wire, tid, pid, epoch, commit) == 0
        self.settle(offsets, commit)
        self.model.markers[self.model.leo] = commit
        self.model.leo += 1

    def settle(self, offsets: list[int], commit: bool) -> None:
        for o in offsets:
            key, value, _ = self.model.records[o]
            self.model.records[o] = (key, value, "committed" if commit else "aborted")

    def plain(self, tombstone: bool = False, keys: list[bytes] | None = None) -> None:
        records = self.batch("plain", keys)
        if tombstone:
            records[0] = (records[0][0], None)
        self._append(records, self.idempotent.producer_id, self.idempotent.producer_epoch, self.idempotent_seq, None)
        self.idempotent_seq += len(records)


def read_committed_wire(wire: KafkaWire, max_bytes: int) -> tuple[list[tuple[int, bytes | None, bytes | None]], int]:
    """Every record a read_committed consumer gets from offset 0, fetching `max_bytes` at a time; and the LSO."""
    offset, out, lso = 0, [], -1
    while True:
        [p] = partition_data(fetch(wire, [(TOPIC, 0, offset)], isolation_level=1, partition_max_bytes=max_bytes))
        assert p.error_code == 0
        lso = p.last_stable_offset
        got = consume(p.records, offset, p.aborted_transactions, read_committed=True)
        out += got.records
        if got.next_offset <= offset:
            return out, lso
        offset = got.next_offset


def check(model: Model, wire: KafkaWire, rng: random.Random, bootstrap: str | None = None) -> None:
    """read_committed equals the model: only committed records, each the model's at its offset, and the last
    value read per key is the key's latest committed value (tombstones may be gone)."""
    expected = {k: v for k, v in model.latest_committed().items() if v is not None}
    aborted = {v for _, v, outcome in model.records.values() if outcome == "aborted"}
    for max_bytes in (1 << 20, rng.randint(1, 3000)):
        records, lso = read_committed_wire(wire, max_bytes)
        assert lso == model.leo, f"LSO {lso}, model LEO {model.leo}"
        for offset, key, value in records:
            want_key, want_value, outcome = model.records[offset]
            assert outcome != "aborted", f"aborted record {offset} {key!r} delivered to read_committed"
            assert (key, value) == (want_key, want_value), f"offset {offset}: {key!r}={value!r}"
        view = {k: v for _, k, v in records}
        assert {k: v for k, v in view.items() if v is not None} == expected, (
            f"compacted view {view}; {fetch_report(wire)}")
    if bootstrap is not None:  # a real client: the same answer
        values = read_all(bootstrap, TOPIC, "read_committed", partitions=1)
        assert not aborted & set(values), "confluent-kafka delivered aborted records"
        last: dict[bytes, bytes | None] = {}
        for v in values:
            if v is not None:
                last[v.split(b"|")[0]] = v
        assert {k: v for k, v in last.items() if k in expected} == expected


def fetch_report(wire: KafkaWire) -> str:
    """What one read_committed Fetch from offset 0 returned: the aborted transactions and each batch's producer,
    offsets and kind (for a failure message)."""
    [p] = partition_data(fetch(wire, [(TOPIC, 0, 0)], isolation_level=1))
    batches = [(h.producer_id, h.base_offset, h.last_offset, "control" if h.is_control else
                "txn" if h.is_transactional else "plain") for _, h in iter_batches(p.records or b"")]
    aborted = [tuple(t) for t in p.aborted_transactions or []]
    return f"fetch from 0: aborted transactions {aborted}, batches {batches}"


def segment_bases(broker: BrokerProcess) -> list[int]:
    return sorted(int(p.stem) for p in (Path(broker.log_dir) / f"{TOPIC}-0").glob("*.log"))


def segment_of(bases: list[int], offset: int) -> int:
    return max(b for b in bases if b <= offset)


def abort_marker_offsets(wire: KafkaWire) -> list[int]:
    """Offsets of the ABORT markers still in the log (read_uncommitted)."""
    offset, found = 0, []
    while True:
        [p] = partition_data(fetch(wire, [(TOPIC, 0, offset)], isolation_level=0))
        got = consume(p.records, offset, None, read_committed=False)
        found += [o for o, _, commit in got.markers if not commit]
        if got.next_offset <= offset:
            return found
        offset = got.next_offset


def wait_for(condition: object, what: str, timeout: float = 60.0, broker: BrokerProcess | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() >= deadline:
            tail = "\n".join(broker.output().splitlines()[-40:]) if broker is not None else ""
            raise AssertionError(f"timed out waiting for {what}\nbroker log:\n{tail}")
        time.sleep(0.1)


def lso_and_hw(wire: KafkaWire) -> tuple[int, int]:
    [p] = partition_data(fetch(wire, [(TOPIC, 0, 0)], isolation_level=1, partition_max_bytes=1))
    return p.last_stable_offset, p.high_watermark


def test_compacted_transactions_through_kill_restarts_and_cleaning(tmp_path: Path) -> None:
    rng = random.Random(28)
    model = Model()
    broker = BrokerProcess(tmp_path / "data", overrides=OVERRIDES)
    split_markers = 0
    try:
        broker.start()
        create_topic(broker.bootstrap, TOPIC, 1, TOPIC_CONFIG)
        w = Writer(broker, model, rng)
        for cycle in range(CYCLES):
            pid, epoch, offsets = w.transaction("committer", rng.randint(2, 5))
            w.plain(tombstone=cycle % 2 == 1)
            w.end("committer", pid, epoch, offsets, commit=True)
            pid, epoch, offsets = w.transaction("aborter", rng.randint(2, 5))
            w.end("aborter", pid, epoch, offsets, commit=False)
            _pid, _epoch, left_open = w.transaction("left-open", rng.randint(1, 4), timeout_ms=TIMEOUT_ABORT_MS)
            first = left_open[0]
            broker.restart(kill=True)  # SIGKILL with the transaction open
            w.reconnect()
            if cycle % 2:
                init(w.wire, "left-open")  # a new incarnation fences the old one and aborts its transaction
            # else: the coordinator aborts it once its timeout has passed
            wait_for(lambda: lso_and_hw(w.wire) == (model.leo + 1, model.leo + 1), "the abort marker", broker=broker)
            w.settle(left_open, commit=False)
            model.markers[model.leo] = False
            bases = segment_bases(broker)
            split_markers += segment_of(bases, model.leo) > segment_of(bases, first)
            model.leo += 1
            check(model, w.wire, rng, broker.bootstrap if cycle == CYCLES - 1 else None)
        assert split_markers >= 1, "no abort marker landed in a later segment than its transaction's records"

        # Clean until every ABORT marker outside the active segment is gone (producers expired, horizons passed;
        # a COMMIT marker stays while its transaction has records, as in Kafka's CleanedTransactionMetadata);
        # read_committed must equal the model at every round.
        def markers_gone() -> bool:
            w.plain(keys=[b"filler"])  # dirty data that keeps rolling segments for the cleaner
            check(model, w.wire, rng)
            active = segment_bases(broker)[-1]
            return all(o >= active for o in abort_marker_offsets(w.wire))

        wait_for(markers_gone, "the cleaner to remove the markers", timeout=180, broker=broker)
        removable = [o for o, commit in model.markers.items() if not commit and o < segment_bases(broker)[-1]]
        assert len(removable) >= CYCLES, f"only {removable} ABORT markers were cleanable"
        check(model, w.wire, rng, broker.bootstrap)
        w.wire.close()
    finally:
        broker.stop()
