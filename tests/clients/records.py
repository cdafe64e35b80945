"""The record set every client suite produces and reads back.

Record i goes to partition i % partitions with key "key-<i>", a value derived from i, three headers and
timestamp base_ts + i. tests/java/TidelogClient.java builds the same records, so Python can compute what the
Java client should have written without exchanging data.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from tidelog.protocol.record_batch import RecordBatchHeader, iter_batches

COUNT = 20_000
PARTITIONS = 3
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Compression ids in the batch attributes (Kafka's DefaultRecordBatch; Kafka's CompressionType ids).
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CREATE_TIME = "CreateTime"

Headers = tuple[tuple[str, bytes], ...]


class Rec(NamedTuple):
    partition: int
    offset: int
    timestamp: int
    key: bytes
    value: bytes
    headers: Headers


def key(i: int) -> bytes:
    return f"key-{i}".encode()


def value(i: int) -> bytes:
    # Repetitive text so the codecs really compress, with a length that varies per record.
    return f"value-{i}-{'tide' * (i % 40)}-end".encode()


def headers(i: int, codec: str) -> Headers:
    return (("index", str(i).encode()), ("codec", codec.encode()), ("empty", b""))


def base_timestamp() -> int:
    """A CreateTime base in the recent past, inside every broker timestamp bound (KAFKA-16368 caps the future)."""
    return (int(time.time()) - 3600) * 1000


def expected(codec: str, base_ts: int, count: int = COUNT, partitions: int = PARTITIONS) -> list[Rec]:
    """What a fresh topic holds after records 0..count-1 were produced in order (offsets start at 0)."""
    return [
        Rec(i % partitions, i // partitions, base_ts + i, key(i), value(i), headers(i, codec))
        for i in range(count)
    ]


def assert_records(got: list[Rec], want: list[Rec]) -> None:
    """Exact comparison: same records at the same (partition, offset), and per partition the consumer saw
    offsets in increasing order (the order of `got` is the order the client delivered them)."""
    last: dict[int, int] = {}
    for r in got:
        assert r.offset > last.get(r.partition, -1), (
            f"partition {r.partition}: offset {r.offset} out of order"
        )
        last[r.partition] = r.offset
    assert len(got) == len(want), f"got {len(got)} records, want {len(want)}"
    by_pos = {(r.partition, r.offset): r for r in got}
    bad = [(w, by_pos.get((w.partition, w.offset))) for w in want if by_pos.get((w.partition, w.offset)) != w]
    assert not bad, f"{len(bad)} records differ; first ones (want, got): {bad[:3]}"


def normalize_headers(hs: Iterable[tuple[str, bytes | None]] | None) -> Headers:
    """Clients differ in how they hand back headers (list of tuples, None when absent)."""
    return tuple((k, b"" if v is None else bytes(v)) for k, v in (hs or ()))


def stored_batches(log_dir: str, topic: str) -> Iterator[RecordBatchHeader]:
    """Headers of every batch in the topic's segment files (read straight from disk)."""
    for path in sorted(glob.glob(os.path.join(log_dir, f"{glob.escape(topic)}-*", "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        for _, h in iter_batches(data):
            yield h


def on_disk_codecs(log_dir: str, topic: str) -> dict[int, int]:
    """Compression id -> record count over every batch stored for the topic."""
    counts: dict[int, int] = {}
    for h in stored_batches(log_dir, topic):
        counts[h.compression] = counts.get(h.compression, 0) + h.records_count
    return counts


def assert_stored_with(log_dir: str, topic: str, codec: str) -> None:
    """Proves the client really compressed (librdkafka < 2.11.1 silently sends uncompressed batches when
    Produce v0 is not advertised, KAFKA-18659) and the broker kept the producer's codec. Clients may send a
    batch uncompressed when compression does not make it smaller (kafka-python does), so a few records in
    uncompressed batches are allowed; most must be in batches of the requested codec."""
    counts = on_disk_codecs(log_dir, topic)
    want = CODEC_IDS[codec]
    assert set(counts) <= {0, want}, f"unexpected codecs on disk: {counts}"
    assert counts.get(want, 0) * 2 > sum(counts.values()), f"mostly not stored as {codec}: {counts}"


def assert_round_trip(
    broker: Any,
    topic: str,
    codec: str,
    produce: Callable[[str, str, str, int], None],
    consume: Callable[[str, str], list[Rec]],
) -> None:
    """The per-client codec test: create a PARTITIONS-partition topic, `produce(bootstrap, topic, codec,
    base_ts)` the COUNT records, check the codec on disk, and `consume(bootstrap, topic)` them back exactly."""

    broker.create_topic(topic, PARTITIONS)
    base_ts = base_timestamp()
    produce(broker.bootstrap, topic, codec, base_ts)
    assert_stored_with(broker.log_dir, topic, codec)
    assert_records(consume(broker.bootstrap, topic), expected(codec, base_ts))
