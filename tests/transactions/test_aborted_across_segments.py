"""Aborted transactions larger than a segment, read by every client with read_committed (issue 28, Done-when 1).

An aborted transaction's index entry lives in the segment of its ABORT marker; a Fetch whose range ends before
that segment must still report the transaction (Kafka's LocalLog.collectAbortedTransactions goes on through the
later segments' transaction indexes until TxnIndexSearchResult.isComplete). Two topics with 20,000-byte
segments, written once per module by a confluent-kafka transactional producer:

* "aborted-1000", librdkafka's 0129_fetch_aborted_msgs: 1,000 records of 1,000 bytes in one aborted
  transaction (max.message.bytes 10,000), then one committed transaction of 10 records so that the reads have
  something to deliver;
* "mixed": 2 KB records, committed 300, aborted 1,000, committed 100, aborted 500.

confluent-kafka, kafka-python, aiokafka and the Java client each read them from offset 0 and from the middle of
an aborted transaction, with their default fetch sizes and with small ones, and must deliver exactly the
committed records at or after the start, in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle

from .conftest import TxnJava

OVERRIDES = {"transaction.state.log.num.partitions": 5, "offsets.topic.num.partitions": 5}
# segment.index.bytes: each of the ~250 segments would otherwise preallocate 10 MB offset and time indexes;
# writing the data took 30 s instead of 6 s here (the indexes of a 20 kB segment hold a few entries)
SEGMENT = {"segment.bytes": "20000", "max.message.bytes": "10000", "segment.index.bytes": "4096"}
SMALL_FETCH = 4096  # fetch.max.bytes and max.partition.fetch.bytes: about two 2 KB records


@dataclass(frozen=True)
class Written:
    topic: str
    committed: list[tuple[int, str]]  # (offset, value prefix) of every committed record, in offset order
    middle: int                       # an offset inside the first aborted transaction


@dataclass(frozen=True)
class Data:
    aborted_1000: Written
    mixed: Written


def write(bootstrap: str, topic: str, transactions: list[tuple[bool, int, int]]) -> list[tuple[int, str]]:
    """One transaction per (commit?, records, record size); records "<c|a><txn>-<i>:" padded to the size.
    Returns the (offset, prefix) of the committed records as the producer's delivery reports gave them."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"writer-{topic}", "linger.ms": 20,
                  "message.max.bytes": 10000})
    delivered: list[tuple[int, str]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.offset(), msg.value().split(b":")[0].decode()))

    p.init_transactions(60)
    for t, (commit, count, size) in enumerate(transactions):
        p.begin_transaction()
        for i in range(count):
            prefix = f"{'c' if commit else 'a'}{t}-{i}:".encode()
            p.produce(topic, value=prefix.ljust(size, b"x"), partition=0, on_delivery=on_delivery)
            p.poll(0)
        p.flush(60)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    p.flush(60)
    return sorted(d for d in delivered if d[1].startswith("c"))


pytestmark = pytest.mark.tidelog(overrides=OVERRIDES,
                                 topics={t: {"partitions": 1, "configs": SEGMENT} for t in ("aborted-1000", "mixed")})


@pytest.fixture(scope="module")
def data(tidelog_module_broker: BrokerHandle) -> Data:
    bs = tidelog_module_broker.bootstrap
    first = write(bs, "aborted-1000", [(False, 1000, 1000), (True, 10, 1000)])
    assert [o for o, _ in first] == list(range(1001, 1011))  # 1,000 aborted, their marker, 10 committed
    mixed = write(bs, "mixed", [(True, 300, 2048), (False, 1000, 2048), (True, 100, 2048), (False, 500, 2048)])
    assert [o for o, _ in mixed] == [*range(300), *range(1302, 1402)]
    for topic, at_least in (("aborted-1000", 40), ("mixed", 150)):  # the transactions span many segments
        assert tidelog_module_broker.call(lambda t=topic: len(tidelog_module_broker.state.log_manager.get_log(TopicPartition(t, 0)).segments)) \
            >= at_least
    return Data(Written("aborted-1000", first, 500), Written("mixed", mixed, 700))


# ----------------------------------------------------------------------------------------------- the readers
Reader = Callable[[str, str, int, bool], list[tuple[int, str]]]
DEADLINE_S = 120.0


def prefix(value: bytes) -> str:
    return value.split(b":")[0].decode()


def read_confluent(bootstrap: str, topic: str, start: int, small: bool) -> list[tuple[int, str]]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": f"rc-{time.monotonic_ns()}",
                            "isolation.level": "read_committed", "enable.partition.eof": True,
                            "enable.auto.commit": False}
    if small:
        # librdkafka requires fetch.max.bytes >= message.max.bytes (1,000 at least)
        conf.update({"fetch.max.bytes": SMALL_FETCH, "message.max.bytes": SMALL_FETCH,
                     "max.partition.fetch.bytes": SMALL_FETCH})
    c = Consumer(conf)
    got: list[tuple[int, str]] = []
    try:
        c.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return got
                raise AssertionError(msg.error())
            got.append((msg.offset(), prefix(msg.value())))
        raise AssertionError(f"confluent-kafka: no end of {topic} within {DEADLINE_S} s ({len(got)} records)")
    finally:
        c.close()


def read_kafka_python(bootstrap: str, topic: str, start: int, small: bool) -> list[tuple[int, str]]:
    from kafka import KafkaConsumer, TopicPartition

    sizes = {"fetch_max_bytes": SMALL_FETCH, "max_partition_fetch_bytes": SMALL_FETCH} if small else {}
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False,
                      **sizes)
    tp = TopicPartition(topic, 0)
    got: list[tuple[int, str]] = []
    try:
        c.assign([tp])
        c.seek(tp, start)
        end = c.end_offsets([tp])[tp]
        deadline = time.monotonic() + DEADLINE_S
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python stuck at {c.position(tp)} of {end}"
            for records in c.poll(timeout_ms=500).values():
                got.extend((r.offset, prefix(r.value)) for r in records)
        return got
    finally:
        c.close()


def read_aiokafka(bootstrap: str, topic: str, start: int, small: bool) -> list[tuple[int, str]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[tuple[int, str]]:
        sizes = {"fetch_max_bytes": SMALL_FETCH, "max_partition_fetch_bytes": SMALL_FETCH} if small else {}
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, **sizes)
        await c.start()
        tp = TopicPartition(topic, 0)
        got: list[tuple[int, str]] = []
        try:
            c.assign([tp])
            c.seek(tp, start)
            end = (await c.end_offsets([tp]))[tp]
            deadline = time.monotonic() + DEADLINE_S
            while await c.position(tp) < end:
                assert time.monotonic() < deadline, f"aiokafka stuck at {await c.position(tp)} of {end}"
                for records in (await c.getmany(tp, timeout_ms=500)).values():
                    got.extend((r.offset, prefix(r.value)) for r in records)
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


@pytest.fixture(scope="module")
def java_reads(tidelog_module_broker: BrokerHandle, data: Data, txn_java: TxnJava) -> dict[tuple[str, int, bool], list[tuple[int, str]]]:
    """Every read of the Java client, by (topic, start, small): one JVM runs them all, one consumer each."""
    specs = [(w.topic, start, small) for w in (data.aborted_1000, data.mixed) for start in (0, w.middle)
             for small in (False, True)]
    lines = txn_java.run("read", tidelog_module_broker.bootstrap,
                         *(f"{t}:{start}:{SMALL_FETCH if small else 0}" for t, start, small in specs))
    reads: dict[tuple[str, int, bool], list[tuple[int, str]]] = {spec: [] for spec in specs}
    for line in lines:
        spec = specs[line["spec"]]
        if "done" in line:
            assert line["position"] >= line["end"], f"the Java client stopped early in {spec}: {line}"
        else:
            reads[spec].append((line["o"], line["v"]))
    return reads


CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka", pytest.param("java", marks=pytest.mark.java)]


@pytest.fixture(params=CLIENTS)
def reader(request: pytest.FixtureRequest) -> Reader:
    if request.param == "java":
        reads = request.getfixturevalue("java_reads")
        return lambda _bootstrap, topic, start, small: reads[(topic, start, small)]  # type: ignore[no-any-return]
    return {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python,
            "aiokafka": read_aiokafka}[request.param]


# ------------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("small", [False, True], ids=["default-fetch", "small-fetch"])
@pytest.mark.parametrize("from_middle", [False, True], ids=["from-0", "from-aborted-middle"])
@pytest.mark.parametrize("scenario", ["aborted_1000", "mixed"])
def test_read_committed_delivers_exactly_the_committed_records(
        scenario: str, from_middle: bool, small: bool, reader: Reader, data: Data, tidelog_module_broker: BrokerHandle) -> None:
    written: Written = getattr(data, scenario)
    start = written.middle if from_middle else 0
    expected = [(o, v) for o, v in written.committed if o >= start]
    got = reader(tidelog_module_broker.bootstrap, written.topic, start, small)
    aborted = [r for r in got if r[1].startswith("a")]
    assert not aborted, f"{len(aborted)} aborted records delivered of {len(got)}, first {aborted[:3]}"
    assert got == expected
