"""The produce fast lane (log_validator._validate_fast over the C check_batch) answers exactly as the full validation does:
for any batch of any codec, mutated or not, under any topic config, both give the same result and leave the same
bytes, or both refuse it with the same error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.accelerators import require_built
from tidelog.config.log_config import LogConfig
from tidelog.protocol import record_walk
from tidelog.protocol.errors import KafkaError
from tidelog.protocol.record_batch import HEADER_SIZE, write_crc
from tidelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, build_batch
from tidelog.storage import log_validator
from tidelog.storage.log_validator import validate_records


@pytest.fixture(autouse=True)
def _built() -> None:
    require_built(record_walk.check_batch is not None, "the C fast-lane batch check")

NOW = 1_700_000_000_000


def _validate(data: bytes, config: LogConfig, fast: bool) -> tuple[object, ...]:
    buf = bytearray(data)
    saved = record_walk.check_batch
    if not fast:
        record_walk.check_batch = None
    try:
        r = validate_records(memoryview(buf), config, 500, 3, NOW)
    except KafkaError as e:
        return ("error", e.code, e.record_errors)
    finally:
        record_walk.check_batch = saved
    return (bytes(r.records), r.first_offset, r.last_offset, r.max_timestamp, r.offset_of_max_timestamp,
            r.log_append_time, r.producer_id, r.producer_epoch, r.base_sequence, r.last_sequence, r.is_transactional,
            r.record_count)


records = st.lists(
    st.tuples(st.integers(-5, 5), st.integers(-10_000, 10_000), st.none() | st.binary(max_size=20),
              st.none() | st.binary(max_size=40),
              st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=4)), max_size=2)),
    min_size=1, max_size=5)

configs = st.builds(
    LogConfig,
    cleanup_policy=st.sampled_from(["delete", "compact"]),
    message_timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
    message_timestamp_before_max_ms=st.sampled_from([2**63 - 1, 5_000]),
    message_timestamp_after_max_ms=st.sampled_from([2**63 - 1, 5_000]),
    compression_type=st.sampled_from(["producer", "uncompressed", "lz4", "zstd"]),
    max_message_bytes=st.sampled_from([1_048_588, 200]),
)


@settings(max_examples=800, deadline=None)
@given(records, configs, st.data())
def test_fast_lane_and_full_validation_agree(recs: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]], config: LogConfig, data: st.DataObject) -> None:
    pid = data.draw(st.sampled_from([-1, 7]))
    batch = build_batch(
        [Record(i + (od if data.draw(st.booleans()) else 0), NOW + ts, k, v, tuple(h)) for i, (od, ts, k, v, h)
         in enumerate(recs)],
        0, compression=data.draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD])), producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        base_sequence=data.draw(st.sampled_from([-1, 0, 9])) if pid >= 0 else -1,
        is_transactional=data.draw(st.booleans()) and pid >= 0,
    )
    # Mutations: any byte flipped (header fields, CRC, varints), a truncation, or trailing bytes.
    for _ in range(data.draw(st.integers(0, 2))):
        at = data.draw(st.integers(0, len(batch) - 1))
        batch[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        batch = batch[: data.draw(st.integers(1, len(batch)))]
    elif data.draw(st.booleans()):
        batch += bytes(data.draw(st.integers(1, 70)))
    if len(batch) >= HEADER_SIZE and data.draw(st.booleans()):
        write_crc(batch, 0, len(batch))  # a mutated batch with a matching CRC reaches the record walk
    assert _validate(bytes(batch), config, True) == _validate(bytes(batch), config, False)


def test_fast_lane_takes_the_common_batch() -> None:
    """A plain produced batch is answered by the fast lane (not silently by the full path)."""
    batch = build_batch([Record(i, NOW, b"k", b"v" * 100) for i in range(10)], 0)
    calls = []
    original = log_validator._validate_fast

    def spy(*args: object) -> object:
        result = original(*args)  # type: ignore[arg-type]
        calls.append(result is not None)
        return result

    log_validator._validate_fast = spy  # type: ignore[assignment]
    try:
        result = validate_records(memoryview(bytearray(batch)), LogConfig(), 500, 3, NOW)
    finally:
        log_validator._validate_fast = original
    assert calls == [True] and result.headers is not None
    assert (result.first_offset, result.last_offset, result.headers[0].base_offset) == (500, 509, 500)


def test_a_compressed_batch_too_large_to_inflate_whole_takes_the_streaming_walk() -> None:
    big = build_batch([Record(i, NOW, b"k", bytes(1000)) for i in range(1100)], 0, compression=LZ4)  # ~1.1 MB
    assert log_validator._validate_fast(memoryview(bytearray(big)), LogConfig(), 0, 0, NOW, 64 << 20) is None
    result = validate_records(memoryview(bytearray(big)), LogConfig(), 0, 0, NOW)
    assert (result.record_count, result.headers) == (1100, None)
