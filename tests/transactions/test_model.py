"""Model-based test of transactions on a real broker (issue 28, done-when 2).

The model: per partition, the list of every record written (offset, key, value, the transaction it belongs to or
none), the control markers (offset, producer id, commit or abort), the log end offset, and each transaction's
state (open, committed, aborted). The last stable offset is the first offset of the earliest open transaction,
else the log end. read_uncommitted sees every record below the high watermark; read_committed sees the records
below the LSO that are not in an aborted transaction.

Hypothesis drives an in-process broker (tidelog.testing.run_broker on a ManualClock) over raw requests: three
transactional producers (produce in a transaction over one or both topics, commit, abort, or leave it open until
the coordinator times it out), two idempotent producers, forced rolls on small segments (segment.bytes drawn per
example), clean restarts, producer expiry, and synchronous cleanings of a compacted transactional topic with a
1 s delete.retention.ms (the clock is advanced past the horizons). After every step both topics are read in full
in both isolation levels and compared with the model, and a rule fetches at random offsets with random max_bytes.
Every read is filtered by the aborted_transactions list as a Kafka consumer does (wire_lib.consume).

For the plain topic the reads must equal the model exactly. For the compacted topic every record read must be
the model's record at that offset (nothing aborted, nothing open under read_committed), every key's latest
committed value must be there, and the last value read per key must equal the model's latest committed value.

CI runs a few hundred steps; a deeper run by hand: TIDELOG_MODEL_EXAMPLES=200 TIDELOG_MODEL_STEPS=100.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.broker.broker_testlib import fetch, partition_data
from tidelog.clock import ManualClock
from tidelog.protocol.errors import ErrorCode as E
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire, run_broker

from .wire_lib import Consumed, add_partitions, consume, end_txn, init, produce_records

EXAMPLES = int(os.environ.get("TIDELOG_MODEL_EXAMPLES", "10"))
STEPS = int(os.environ.get("TIDELOG_MODEL_STEPS", "50"))
DEEP = "TIDELOG_MODEL_EXAMPLES" in os.environ or "TIDELOG_MODEL_STEPS" in os.environ

PLAIN, COMPACT = "model-txn", "model-compact"
TOPICS = (PLAIN, COMPACT)
KEYS = [b"k%d" % i for i in range(6)]
TXN_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms: other steps never move the clock this far
DELETE_RETENTION_MS = 1000
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
FULL_READ_BYTES = 1 << 20
STATS: Counter[str] = Counter()  # examples, steps and events of the current run

OVERRIDES = {
    "log.cleaner.enable": False,  # the test cleans synchronously (LogCleaner.clean_once)
    "transaction.state.log.num.partitions": 1,
    "offsets.topic.num.partitions": 1,
    # nothing acts on its own during an example (the coordinator's timer would wait TXN_TIMEOUT_MS of real time;
    # retries and producer expiry wait an hour): the test aborts timed-out transactions and expires producers
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": HOUR_MS,
    "producer.id.expiration.check.interval.ms": HOUR_MS,
}


@dataclass
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    txn: int | None  # the transaction (Txn.id) or None for an idempotent producer's record


@dataclass
class Txn:
    id: int
    producer_id: int
    start_ms: int
    first_offsets: dict[str, int] = field(default_factory=dict)  # topic -> first offset on its partition
    state: str = "open"  # open, commit, abort


@dataclass
class Producer:
    name: str
    transactional_id: str | None
    producer_id: int = -1
    epoch: int = -1
    ready: bool = False  # False: InitProducerId first (new, fenced by a timeout, or expired)
    seq: dict[str, int] = field(default_factory=dict)
    txn: Txn | None = None


@dataclass
class Partition:
    records: list[Rec] = field(default_factory=list)
    markers: dict[int, tuple[int, bool]] = field(default_factory=dict)  # offset -> (producer id, commit)
    leo: int = 0


class TransactionModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.broker_cm: Any = None
        self.broker: BrokerHandle | None = None
        self.wire: KafkaWire | None = None
        self.parts = {t: Partition() for t in TOPICS}
        self.txns: dict[int, Txn] = {}
        self.txn_producers = [Producer(f"tx{i}", f"model-tx{i}") for i in range(3)]
        self.idem_producers = [Producer(f"id{i}", None) for i in range(2)]
        self.counter = 0
        self.steps_since_restart = 0

    # ------------------------------------------------------------------------------------------ broker
    @initialize(plain_segment=st.integers(1200, 5000), compact_segment=st.integers(1200, 5000),
                index_interval=st.sampled_from([64, 1024, 4096]))
    def start(self, plain_segment: int, compact_segment: int, index_interval: int) -> None:
        topics = {
            PLAIN: {"partitions": 1, "configs": {"segment.bytes": plain_segment, "retention.ms": -1,
                                                 "index.interval.bytes": index_interval}},
            COMPACT: {"partitions": 1, "configs": {
                "cleanup.policy": "compact", "segment.bytes": compact_segment, "index.interval.bytes": index_interval,
                "delete.retention.ms": DELETE_RETENTION_MS, "min.cleanable.dirty.ratio": 0.01,
                "min.compaction.lag.ms": 0}},
        }
        self.broker_cm = run_broker(overrides=OVERRIDES, clock=self.clock, topics=topics)
        self.broker = self.broker_cm.__enter__()
        self.wire = KafkaWire(self.broker.bootstrap, client_id="model", timeout=120)
        STATS["examples"] += 1

    def teardown(self) -> None:
        if self.broker is not None:
            STATS["aborted transactions with the marker in a later segment"] += self.split_aborted_transactions()
            self.count_cleaned_away()
        if self.wire is not None:
            self.wire.close()
        if self.broker_cm is not None:
            self.broker_cm.__exit__(None, None, None)
        if DEEP and STATS["examples"] % 10 == 0:  # progress of a long run (pytest -s)
            print(f"{time.strftime('%H:%M:%S')} {STATS['examples']} examples, {STATS['steps']} steps", flush=True)

    def _broker(self) -> BrokerHandle:
        assert self.broker is not None
        return self.broker

    def _wire(self) -> KafkaWire:
        assert self.wire is not None
        return self.wire

    def _log(self, topic: str) -> Any:
        log = self._broker().state.log_manager.get_log(TopicPartition(topic, 0))
        assert log is not None
        return log

    def split_aborted_transactions(self) -> int:
        """Aborted transactions of the plain topic whose ABORT marker lies in a later segment than their first
        record: the case of issue 28."""
        segments = self._log(PLAIN).segments
        markers = [(pid, o) for o, (pid, _commit) in self.parts[PLAIN].markers.items()]
        split = 0
        for t in self.txns.values():
            first = t.first_offsets.get(PLAIN)
            if t.state != "abort" or first is None:
                continue
            marker = min(o for (pid, o) in markers if pid == t.producer_id and o > first)
            split += segments.floor_segment(first).base_offset != segments.floor_segment(marker).base_offset
        return split

    def count_cleaned_away(self) -> None:
        """How many aborted records and markers of the compacted topic the cleaner removed in this example."""
        offset, records, markers = 0, set(), set()
        while True:
            [pd] = partition_data(fetch(self._wire(), [(COMPACT, 0, offset)], isolation_level=0))
            got = consume(pd.records, offset, None, read_committed=False)
            records |= {o for o, _, _ in got.records}
            markers |= {o for o, _, _ in got.markers}
            if got.next_offset <= offset:
                break
            offset = got.next_offset
        part = self.parts[COMPACT]
        STATS["compacted: aborted records cleaned away"] += sum(
            1 for r in part.records if r.txn is not None and self.txns[r.txn].state == "abort"
            and r.offset not in records)
        STATS["compacted: markers cleaned away"] += len(set(part.markers) - markers)

    # ------------------------------------------------------------------------------------------ model
    def lso(self, topic: str) -> int:
        firsts = [t.first_offsets[topic] for t in self.txns.values() if t.state == "open" and topic in t.first_offsets]
        return min(firsts, default=self.parts[topic].leo)

    def visible(self, topic: str, read_committed: bool) -> list[Rec]:
        if not read_committed:
            return list(self.parts[topic].records)
        lso = self.lso(topic)
        return [r for r in self.parts[topic].records
                if r.offset < lso and (r.txn is None or self.txns[r.txn].state == "commit")]

    def latest_committed(self, topic: str) -> dict[bytes | None, Rec]:
        latest: dict[bytes | None, Rec] = {}
        for r in self.visible(topic, read_committed=True):
            latest[r.key] = r
        return latest

    def must_be_read(self, topic: str, read_committed: bool) -> set[int]:
        """Offsets no cleaning may take away: every key's latest committed value (a tombstone may go after its
        horizon) and, under read_uncommitted, everything at or above the LSO (never cleanable)."""
        offsets = {r.offset for r in self.latest_committed(topic).values() if r.value is not None}
        if not read_committed:
            lso = self.lso(topic)
            offsets |= {r.offset for r in self.parts[topic].records if r.offset >= lso}
        return offsets

    def new_records(self, topic: str, keys: list[bytes], size: int, tombstone: bool,
                    who: str) -> list[tuple[bytes | None, bytes | None]]:
        out: list[tuple[bytes | None, bytes | None]] = []
        for i, key in enumerate(keys):
            self.counter += 1
            value: bytes | None = f"{who}-{self.counter}-".encode().ljust(size, b"x")
            if tombstone and topic == COMPACT and i == 0:
                value = None
            out.append((key, value))
        return out

    # ------------------------------------------------------------------------------------------ producers
    def ensure_ready(self, p: Producer) -> None:
        if p.ready:
            return
        resp = init(self._wire(), p.transactional_id, timeout_ms=TXN_TIMEOUT_MS)
        p.producer_id, p.epoch, p.seq, p.ready = resp.producer_id, resp.producer_epoch, {}, True

    def append(self, p: Producer, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
        part = self.parts[topic]
        seq = p.seq.get(topic, 0)
        resp = produce_records(self._wire(), topic, 0, records, self.clock.milliseconds(), p.producer_id, p.epoch,
                               seq, p.transactional_id)
        assert resp.error_code == 0, f"{p.name} produce to {topic}: error {resp.error_code}"
        assert resp.base_offset == part.leo, f"{topic}: appended at {resp.base_offset}, model LEO {part.leo}"
        txn = p.txn.id if p.txn is not None else None
        if p.txn is not None:
            p.txn.first_offsets.setdefault(topic, part.leo)
        part.records.extend(Rec(part.leo + i, k, v, txn) for i, (k, v) in enumerate(records))
        part.leo += len(records)
        p.seq[topic] = seq + len(records)

    @rule(n=st.integers(0, 2), topic=st.sampled_from(TOPICS), keys=st.lists(st.sampled_from(KEYS), min_size=1,
                                                                               max_size=4),
          size=st.integers(1, 250), tombstone=st.integers(0, 5))
    def transactional_produce(self, n: int, topic: str, keys: list[bytes], size: int, tombstone: int) -> None:
        p = self.txn_producers[n]
        self.ensure_ready(p)
        assert p.transactional_id is not None
        if p.txn is None:
            self.counter += 1
            p.txn = Txn(self.counter, p.producer_id, self.clock.milliseconds())
            self.txns[p.txn.id] = p.txn
        if topic not in p.txn.first_offsets:
            got = add_partitions(self._wire(), p.transactional_id, p.producer_id, p.epoch, topic, [0])
            assert got == {(topic, 0): 0}, got
        self.append(p, topic, self.new_records(topic, keys, size, tombstone == 0, p.name))
        STATS["transactional batches"] += 1

    @rule(n=st.integers(0, 2), topic=st.sampled_from(TOPICS), keys=st.lists(st.sampled_from(KEYS), min_size=1,
                                                                               max_size=4),
          size=st.integers(1, 250), tombstone=st.integers(0, 5))
    def transactional_produce_more(self, n: int, topic: str, keys: list[bytes], size: int, tombstone: int) -> None:
        """The same as transactional_produce: a second rule doubles its share of the steps."""
        self.transactional_produce(n, topic, keys, size, tombstone)

    @precondition(lambda self: any(p.txn is not None for p in self.txn_producers))
    @rule(n=st.integers(0, 2))
    def commit(self, n: int) -> None:
        self.end_transaction(n, commit=True)

    @precondition(lambda self: any(p.txn is not None for p in self.txn_producers))
    @rule(n=st.integers(0, 2))
    def abort(self, n: int) -> None:
        self.end_transaction(n, commit=False)

    def end_transaction(self, n: int, commit: bool) -> None:
        open_ = [p for p in self.txn_producers if p.txn is not None]
        p = open_[n % len(open_)]
        assert p.txn is not None and p.transactional_id is not None
        assert end_txn(self._wire(), p.transactional_id, p.producer_id, p.epoch, commit) == E.NONE
        for topic in sorted(p.txn.first_offsets):
            part = self.parts[topic]
            part.markers[part.leo] = (p.producer_id, commit)
            part.leo += 1
        p.txn.state = "commit" if commit else "abort"
        p.txn = None
        STATS["commits" if commit else "aborts"] += 1

    @rule(n=st.integers(0, 1), topic=st.sampled_from(TOPICS), keys=st.lists(st.sampled_from(KEYS), min_size=1,
                                                                               max_size=4),
          size=st.integers(1, 250), tombstone=st.integers(0, 5))
    def idempotent_produce(self, n: int, topic: str, keys: list[bytes], size: int, tombstone: int) -> None:
        p = self.idem_producers[n]
        self.ensure_ready(p)
        self.append(p, topic, self.new_records(topic, keys, size, tombstone == 0, p.name))
        STATS["idempotent batches"] += 1

    @precondition(lambda self: any(p.txn is not None for p in self.txn_producers))
    @rule()
    def time_out_open_transactions(self) -> None:
        """The coordinator aborts every transaction older than its timeout (Kafka's abortTimedOutTransactions),
        fencing its producer; the markers' order among producers is the coordinator's, read back from the log."""
        b = self._broker()
        self.clock.advance(TXN_TIMEOUT_MS + 1)
        b.call(b.state.txn_coordinator.run_periodic_tasks)  # the coordinator's timer: what is due runs now
        timed_out = [p for p in self.txn_producers if p.txn is not None]
        for topic in TOPICS:
            part = self.parts[topic]
            expected = {p.producer_id for p in timed_out if p.txn is not None and topic in p.txn.first_offsets}
            found: list[tuple[int, int, bool]] = []
            offset = part.leo
            while True:  # one read per segment: the markers may straddle a roll
                [pd] = partition_data(fetch(self._wire(), [(topic, 0, offset)], isolation_level=0))
                got = consume(pd.records, offset, pd.aborted_transactions, read_committed=False)
                assert got.records == []
                found += got.markers
                if got.next_offset <= offset:
                    break
                offset = got.next_offset
            assert sorted(pid for _, pid, _ in found) == sorted(expected)
            for offset, pid, commit in found:
                assert not commit and offset == part.leo
                part.markers[offset] = (pid, False)
                part.leo += 1
        STATS["timed-out transactions"] += len(timed_out)
        for p in timed_out:
            assert p.txn is not None
            p.txn.state = "abort"
            p.txn, p.ready = None, False

    @rule(topic=st.sampled_from(TOPICS))
    def roll(self, topic: str) -> None:
        log = self._log(topic)
        self._broker().call(lambda: log.roll())
        STATS["rolls"] += 1

    @rule(advance=st.sampled_from([0, 0, 600, DELETE_RETENTION_MS + 1]), passes=st.integers(1, 3),
          expire=st.integers(0, 3))
    def clean(self, advance: int, passes: int, expire: int) -> None:
        """Cleanings of the compacted topic after a roll, the clock moved on so tombstones' and markers' horizons
        pass. Now
        and then (expire == 0, no transaction open) a day passes first: the logs forget every idle producer, so
        the cleaner may drop their last batches and then their markers; the producers start again with
        InitProducerId."""
        b = self._broker()
        if expire == 0 and all(p.txn is None for p in self.txn_producers):
            self.clock.advance(DAY_MS + 1)
            b.call(lambda: b.state.log_manager.remove_expired_producers())
            for p in self.txn_producers + self.idem_producers:
                p.ready = False
            STATS["producer expiries"] += 1
        self.clock.advance(advance)
        log = self._log(COMPACT)
        b.call(lambda: log.roll())  # what was written so far becomes cleanable (up to the LSO)
        STATS["clean steps"] += 1
        for _ in range(passes):
            if not b.state.cleaner.clean_once():
                break
            STATS["cleanings"] += 1

    @precondition(lambda self: self.steps_since_restart >= 5)  # restarts are slow: at most one in five steps
    @rule()
    def restart(self) -> None:
        self.steps_since_restart = 0
        self._wire().close()
        self._broker().restart()
        STATS["restarts"] += 1
        self.wire = KafkaWire(self._broker().bootstrap, client_id="model", timeout=120)

    # ------------------------------------------------------------------------------------------ reads
    def fetch_once(self, topic: str, offset: int, max_bytes: int, read_committed: bool) -> Consumed:
        part = self.parts[topic]
        [pd] = partition_data(fetch(self._wire(), [(topic, 0, offset)], isolation_level=int(read_committed),
                                    partition_max_bytes=max_bytes))
        assert pd.error_code == 0, f"fetch {topic}@{offset}: error {pd.error_code}"
        assert (pd.high_watermark, pd.last_stable_offset) == (part.leo, self.lso(topic)), \
            f"{topic}: HW/LSO {(pd.high_watermark, pd.last_stable_offset)}, model {(part.leo, self.lso(topic))}"
        listed = [(t.producer_id, t.first_offset) for t in pd.aborted_transactions or []]
        aborted = {(t.producer_id, t.first_offsets[topic]) for t in self.txns.values()
                   if t.state == "abort" and topic in t.first_offsets}
        assert set(listed) <= aborted, f"{topic}@{offset}: listed as aborted {set(listed) - aborted}"
        got = consume(pd.records, offset, pd.aborted_transactions, read_committed)
        bound = self.lso(topic) if read_committed else part.leo
        assert got.next_offset <= bound or not got.records
        self.check_consumed(topic, offset, got, read_committed)
        return got

    def check_consumed(self, topic: str, offset: int, got: Consumed, read_committed: bool) -> None:
        """The records a consumer gets from [offset, got.next_offset) are the model's."""
        part = self.parts[topic]
        end = got.next_offset
        in_range = [r for r in self.visible(topic, read_committed) if offset <= r.offset < end]
        delivered = [(r.offset, r.key, r.value) for r in in_range]
        markers = [(o, pid, c) for o, (pid, c) in sorted(part.markers.items()) if offset <= o < end]
        what = f"{topic} {'read_committed' if read_committed else 'read_uncommitted'} [{offset}, {end})"
        offsets = [o for o, _, _ in got.records]
        assert offsets == sorted(set(offsets)), f"{what}: offsets out of order"
        if topic == PLAIN:
            assert got.records == delivered, f"{what}: got {_diff(got.records, delivered)}"
            assert got.markers == markers, f"{what}: markers {got.markers}, model {markers}"
            bound = self.lso(topic) if read_committed else part.leo
            assert offset >= bound or end > offset, f"{what}: no progress below {bound}"
            return
        allowed = set(delivered)
        extra = [r for r in got.records if r not in allowed]
        assert not extra, f"{what}: records the model does not show here {extra[:5]}"
        must = {(r.offset, r.key, r.value) for r in in_range if r.offset in self.must_be_read(topic, read_committed)}
        missing = sorted(must - set(got.records))
        assert not missing, f"{what}: lost {missing[:5]}"
        assert set(got.markers) <= set(markers), f"{what}: markers {got.markers} not in the model's {markers}"

    def read_all(self, topic: str, read_committed: bool, max_bytes: int) -> list[tuple[int, bytes | None, bytes | None]]:
        offset, out = 0, []
        for _ in range(100_000):
            got = self.fetch_once(topic, offset, max_bytes, read_committed)
            out.extend(got.records)
            if got.next_offset <= offset:
                break
            offset = got.next_offset
        bound = self.lso(topic) if read_committed else self.parts[topic].leo
        unread = [o for o in self.must_be_read(topic, read_committed) if offset <= o < bound]
        if topic == PLAIN:
            assert offset >= bound, f"{topic}: a full read stopped at {offset} below {bound}"
        assert not unread, f"{topic}: a full read stopped at {offset} before {sorted(unread)[:5]}"
        return out

    @invariant()
    def reads_equal_the_model(self) -> None:
        if self.broker is None:
            return
        STATS["steps"] += 1
        self.steps_since_restart += 1
        for topic in TOPICS:
            for read_committed in (True, False):
                got = self.read_all(topic, read_committed, FULL_READ_BYTES)
                if topic == PLAIN:
                    expected = [(r.offset, r.key, r.value) for r in self.visible(topic, read_committed)]
                    assert got == expected, f"{topic}: full read {_diff(got, expected)}"
                elif read_committed:
                    # the compacted view: the last value read per key is the model's latest committed value
                    view = {k: v for _, k, v in got}
                    model = {k: r.value for k, r in self.latest_committed(topic).items()}
                    assert {k: v for k, v in view.items() if v is not None} == \
                        {k: v for k, v in model.items() if v is not None}, f"{topic}: compacted view {view}"

    @rule(topic=st.sampled_from(TOPICS), where=st.floats(0, 1), max_bytes=st.integers(1, 20_000),
          read_committed=st.booleans())
    def fetch_anywhere(self, topic: str, where: float, max_bytes: int, read_committed: bool) -> None:
        offset = int(where * self.parts[topic].leo)
        self.fetch_once(topic, offset, max_bytes, read_committed)
        STATS["random fetches"] += 1


def _diff(got: list[Any], expected: list[Any]) -> str:
    g, e = set(got), set(expected)
    return (f"{len(got)} records, model {len(expected)}; unexpected {sorted(g - e)[:5]}, "
            f"missing {sorted(e - g)[:5]}")


# A failure is shrunk for up to 5 minutes (Hypothesis' limit) before it is reported; a deeper run has no limit.
@pytest.mark.timeout(0 if DEEP else 900)
def test_transactions_match_the_model() -> None:
    STATS.clear()
    run_state_machine_as_test(TransactionModel, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]))
    # what the run covered (pytest -s shows it; a deeper run by hand reports these counts)
    print(f"\ntransaction model: {STATS['examples']} examples, {STATS['steps']} steps;",
          ", ".join(f"{k} {v}" for k, v in sorted(STATS.items()) if k not in ("examples", "steps")))
