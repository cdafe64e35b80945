"""Produce batches whose BaseTimestamp + a record's TimestampDelta leaves the int64 range (issue #33), over a real
socket: Kafka computes record timestamps in Java long arithmetic (DefaultRecord.readFrom), so the sum wraps
around, and LogValidator.recordHasInvalidTimestamp judges the wrapped value, itself in long arithmetic. On a topic
with timestamp bounds the batch is refused with INVALID_TIMESTAMP and a record error per offending record, and
nothing is stored; on a topic without bounds (the defaults) Kafka takes the batch with the wrapped timestamps.
Never an UNKNOWN_SERVER_ERROR, never an ERROR log line. Both record walks (C and Python) answer alike."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from broker_testlib import create_topic, produce
from hostile_batches import overflowing_batch

from tests.walk_impls import walk_impl  # noqa: F401 - autouse: the C walk and the Python fallback
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.protocol.record_batch import read_header
from tidelog.protocol.records import iter_records
from tidelog.testing import BrokerHandle, KafkaWire

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
DAY_MS = 86_400_000


def fetch_raw(client: KafkaWire, topic: str) -> bytes:
    cls = request_class(1)[4]
    T = cls.FetchTopic
    req = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[
        T(topic=topic, partitions=[T.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    [t] = client.request(1, 4, req).responses
    [p] = t.partitions
    assert p.error_code == 0
    return bytes(p.records or b"")


@pytest.fixture
def topics(tidelog_module_broker: BrokerHandle) -> dict[str, str]:
    """A topic bounded to a day either way, new for each test (a refused batch must leave it empty)."""
    bounded = f"ts-bounded-{uuid.uuid4().hex[:8]}"
    create_topic(tidelog_module_broker.bootstrap, bounded, config={"message.timestamp.before.max.ms": str(DAY_MS),
                                                    "message.timestamp.after.max.ms": str(DAY_MS)})
    return {"bounded": bounded}


def _no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


# (name, BaseTimestamp, deltas): positive overflow wraps to the bottom of the range, negative to the top
REFUSED = [
    ("positive", LONG_MAX - 10, [0, 100]),  # record 0 is far in the future already; record 1 wraps to MIN + 89
    ("negative", LONG_MIN + 10, [0, -100]),  # record 0 is far in the past; record 1 wraps to MAX - 89
    ("largest-deltas", LONG_MAX, [LONG_MAX, LONG_MIN]),  # wrap to -2, and MAX + MIN = -1 (NO_TIMESTAMP)
]


@pytest.mark.parametrize(("name", "base", "deltas"), REFUSED, ids=[c[0] for c in REFUSED])
def test_bounded_topic_refuses_with_record_errors(client: KafkaWire, topics: dict[str, str], name: str, base: int,
                                                  deltas: list[int], caplog: pytest.LogCaptureFixture) -> None:
    topic = topics["bounded"]
    with caplog.at_level(logging.INFO):
        r = produce(client, topic, overflowing_batch(base, deltas))
    assert r.error_code == ErrorCode.INVALID_TIMESTAMP, r
    assert r.base_offset == -1
    # every record whose (wrapped) timestamp is out of the day's bounds; NO_TIMESTAMP (-1) is never checked
    expected = {"positive": [0, 1], "negative": [0, 1], "largest-deltas": [0]}[name]
    assert [e.batch_index for e in r.record_errors] == expected, r.record_errors
    assert all("is out of range" in e.batch_index_error_message for e in r.record_errors)
    _no_error_logged(caplog)
    assert fetch_raw(client, topic) == b""  # nothing stored


def test_bounded_topic_takes_a_sum_that_wraps_to_now(client: KafkaWire, topics: dict[str, str],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """BaseTimestamp MIN and a delta of now + MIN: the sum, now - 2^64, wraps to now, which is in bounds."""
    topic = topics["bounded"]
    now = int(time.time() * 1000)
    with caplog.at_level(logging.INFO):
        r = produce(client, topic, overflowing_batch(LONG_MIN, [now + LONG_MIN]))
    assert r.error_code == 0, r
    _no_error_logged(caplog)
    raw = fetch_raw(client, topic)
    assert [rec.timestamp for rec in iter_records(raw)] == [now]
    assert read_header(raw, 0).max_timestamp == now


@pytest.mark.parametrize(("name", "base", "deltas", "stored"), [
    ("positive", LONG_MAX - 10, [0, 100], [LONG_MAX - 10, LONG_MIN + 89]),
    ("negative", LONG_MIN + 10, [0, -100], [LONG_MIN + 10, LONG_MAX - 89]),
], ids=["positive", "negative"])
def test_unbounded_topic_stores_the_wrapped_timestamps(tidelog_module_broker: BrokerHandle, client: KafkaWire, name: str,
                                                       base: int, deltas: list[int], stored: list[int],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Without timestamp bounds (Long.MAX both ways, the defaults) Kafka takes the batch: its records keep the
    wrapped timestamps and the batch's MaxTimestamp is the largest of them."""
    topic = f"ts-open-{name}-{uuid.uuid4().hex[:6]}"
    create_topic(tidelog_module_broker.bootstrap, topic)
    with caplog.at_level(logging.INFO):
        r = produce(client, topic, overflowing_batch(base, deltas))
    assert (r.error_code, r.base_offset) == (0, 0), r
    _no_error_logged(caplog)
    raw = fetch_raw(client, topic)
    assert [rec.timestamp for rec in iter_records(raw)] == stored
    assert read_header(raw, 0).max_timestamp == max(stored)
