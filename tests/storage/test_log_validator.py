"""LogValidator on batches built by real client code (kafka-python's record builders)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.walk_impls import walk_impl  # noqa: F401 - autouse: the C walk and the Python fallback
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import _install_lazy_kafka_package
from tidelog.protocol.record_batch import crc_is_valid, iter_batches, read_header, write_crc
from tidelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, build_batch, iter_records
from tidelog.storage.log_validator import validate_records

_install_lazy_kafka_package()
from kafka.errors import CorruptRecordError as KafkaPythonCorruptRecordError  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402

NOW = 1_700_000_100_000
TS = 1_700_000_000_000


def client_batch(n: int = 3, codec: int = NONE, keys: list[bytes | None] | None = None,
                 producer: tuple[int, int, int] = (-1, -1, -1), transactional: bool = False,
                 ts: int = TS, value: bytes = b"value") -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, transactional, *producer, batch_size=1 << 24)
    for i in range(n):
        key = keys[i] if keys is not None else b"key-%d" % i
        builder.append(i, ts + i, key, value * 20, [("h", b"x")])
    return bytes(builder.build())


def patch(batch: bytes, offset: int, fmt: str, value: int, fix_crc: bool = True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        write_crc(buf, 0, len(buf))
    return bytes(buf)


def expect(code: ErrorCode, batch: bytes, config: LogConfig | None = None, **kw: object) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        validate_records(batch, config or LogConfig(), 0, 0, NOW, **kw)  # type: ignore[arg-type]
    assert info.value.code == code, info.value
    return info.value


def test_uncompressed_batch_is_stamped_in_place() -> None:
    raw = client_batch(5)
    result = validate_records(raw, LogConfig(), 42, 7, NOW)
    out = bytes(result.records)
    assert (result.first_offset, result.last_offset, result.record_count) == (42, 46, 5)
    h = read_header(out)
    assert (h.base_offset, h.partition_leader_epoch) == (42, 7)
    # in place: everything covered by the CRC is byte-identical, and the CRC is untouched
    assert out[17:] == raw[17:]
    assert crc_is_valid(out, 0, h)
    assert [r.offset for r in iter_records(out)] == [42, 43, 44, 45, 46]
    assert result.max_timestamp == TS + 4 and result.offset_of_max_timestamp == 46
    assert result.log_append_time == -1
    assert DefaultRecordBatch(out).validate_crc()


def test_log_append_time_rewrites_header_only() -> None:
    raw = client_batch(3)
    cfg = LogConfig(message_timestamp_type="LogAppendTime")
    result = validate_records(raw, cfg, 0, 0, NOW)
    out = bytes(result.records)
    h = read_header(out)
    assert h.is_log_append_time and h.max_timestamp == NOW and crc_is_valid(out, 0, h)
    assert out[61:] == raw[61:]
    assert result.log_append_time == NOW and result.max_timestamp == NOW
    assert [r.timestamp for r in DefaultRecordBatch(out)] == [NOW] * 3


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_same_codec_stays_compressed_in_place(codec: int) -> None:
    raw = client_batch(10, codec)
    result = validate_records(raw, LogConfig(), 100, 0, NOW)
    out = bytes(result.records)
    assert out[17:] == raw[17:]
    assert [r.offset for r in DefaultRecordBatch(out)] == list(range(100, 110))


@pytest.mark.parametrize(("topic_codec", "codec_id"), [("gzip", GZIP), ("snappy", SNAPPY), ("lz4", LZ4),
                                                       ("zstd", ZSTD), ("uncompressed", NONE)])
def test_topic_codec_forces_recompression(topic_codec: str, codec_id: int) -> None:
    raw = client_batch(8, ZSTD if codec_id == NONE else NONE, producer=(9, 2, 100))
    result = validate_records(raw, LogConfig(compression_type=topic_codec), 20, 3, NOW)
    out = bytes(result.records)
    h = read_header(out)
    assert h.compression == codec_id and h.base_offset == 20 and h.partition_leader_epoch == 3
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 2, 100)
    records = list(DefaultRecordBatch(out))  # decoded by the client library
    assert [r.offset for r in records] == list(range(20, 28))
    assert [r.key for r in records] == [b"key-%d" % i for i in range(8)]
    assert records[0].headers == [("h", b"x")] and records[3].timestamp == TS + 3
    assert (result.first_offset, result.last_offset) == (20, 27)


def test_producer_fields_are_reported() -> None:
    raw = client_batch(4, producer=(77, 3, 2_147_483_646), transactional=True)
    r = validate_records(raw, LogConfig(), 0, 0, NOW)
    assert (r.producer_id, r.producer_epoch, r.base_sequence) == (77, 3, 2_147_483_646)
    assert r.last_sequence == 1  # wraps past Int32.MaxValue
    assert r.is_transactional


def test_bad_inner_offsets_in_compressed_batch_are_rebuilt() -> None:
    recs = [Record(i * 2, TS, b"k%d" % i, b"v") for i in range(3)]  # inner offsets 0, 2, 4
    raw = bytes(build_batch(recs, 0, compression=LZ4, last_offset_delta=2))
    cfg = LogConfig(cleanup_policy=("compact",))  # records get decoded for the null-key check
    out = validate_records(raw, cfg, 10, 0, NOW).records
    assert [r.offset for r in iter_records(out)] == [10, 11, 12]


def test_compacted_topic_accepts_keyed_and_rejects_null_keys_per_record() -> None:
    cfg = LogConfig(cleanup_policy=("compact",))
    validate_records(client_batch(3), cfg, 0, 0, NOW)
    err = expect(ErrorCode.INVALID_RECORD, client_batch(4, keys=[b"a", None, b"c", None]), cfg)
    assert [i for i, _ in err.record_errors] == [1, 3]  # type: ignore[attr-defined]


def test_timestamp_bounds() -> None:
    cfg = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    validate_records(client_batch(2, ts=NOW - 500), cfg, 0, 0, NOW)
    err = expect(ErrorCode.INVALID_TIMESTAMP, client_batch(2, ts=NOW - 5000), cfg)
    assert [i for i, _ in err.record_errors] == [0, 1]  # type: ignore[attr-defined]
    only_after = LogConfig(message_timestamp_after_max_ms=1000)
    expect(ErrorCode.INVALID_TIMESTAMP, client_batch(1, ts=NOW + 60_000), only_after)
    validate_records(client_batch(1, ts=0), only_after, 0, 0, NOW)


def test_crc_mismatch_and_short_batches_are_corrupt() -> None:
    raw = bytearray(client_batch(2))
    raw[-1] ^= 0xFF
    expect(ErrorCode.CORRUPT_MESSAGE, bytes(raw))
    expect(ErrorCode.CORRUPT_MESSAGE, client_batch(2)[:40])
    expect(ErrorCode.CORRUPT_MESSAGE, client_batch(2)[:-3])  # Length runs past the end
    expect(ErrorCode.CORRUPT_MESSAGE, patch(client_batch(1), 8, ">i", 10, fix_crc=False))


def test_size_limits() -> None:
    raw = client_batch(50, value=b"x" * 50)
    expect(ErrorCode.MESSAGE_TOO_LARGE, raw, LogConfig(max_message_bytes=len(raw) - 1))
    expect(ErrorCode.RECORD_LIST_TOO_LARGE, raw, LogConfig(segment_bytes=len(raw) - 1))
    validate_records(raw, LogConfig(max_message_bytes=len(raw), segment_bytes=len(raw)), 0, 0, NOW)


def test_invalid_record_cases() -> None:
    one = client_batch(1)
    expect(ErrorCode.INVALID_RECORD, patch(one, 0, ">q", 5, fix_crc=False))  # base offset != 0
    expect(ErrorCode.INVALID_RECORD, patch(one, 57, ">i", 2))  # RecordsCount != LastOffsetDelta + 1
    expect(ErrorCode.INVALID_RECORD, patch(one, 21, ">h", 0x30))  # control batch from a client
    expect(ErrorCode.INVALID_RECORD, patch(one, 43, ">q", 12))  # producer id without a sequence
    expect(ErrorCode.INVALID_RECORD, one + one)  # two batches
    expect(ErrorCode.INVALID_RECORD, b"")
    legacy = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    legacy.append(0, TS, b"k", b"v")
    expect(ErrorCode.INVALID_RECORD, bytes(legacy.build()))  # magic 1


def test_client_may_not_set_log_append_time() -> None:
    expect(ErrorCode.INVALID_TIMESTAMP, patch(client_batch(1), 21, ">h", 0x08))


def test_internal_appends_take_several_batches_and_control_batches() -> None:
    marker = build_batch([Record(0, TS, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x07")], 0,
                         producer_id=5, producer_epoch=0, is_transactional=True, is_control=True)
    data = client_batch(2) + bytes(marker) + client_batch(3)
    result = validate_records(data, LogConfig(compression_type="gzip"), 7, 0, NOW, from_client=False)
    batches = [h for _, h in iter_batches(result.records)]
    assert [(h.base_offset, h.last_offset) for h in batches] == [(7, 8), (9, 9), (10, 12)]
    assert [h.compression for h in batches] == [GZIP, NONE, GZIP]  # a marker is never compressed
    assert batches[1].is_control
    assert (result.first_offset, result.last_offset, result.record_count) == (7, 12, 6)


def test_garbled_records_with_a_valid_crc_are_invalid_on_every_topic() -> None:
    raw = bytearray(client_batch(3))
    raw[61:] = b"\x7f" * (len(raw) - 61)  # nonsense records, CRC recomputed so only decoding can tell
    write_crc(raw, 0, len(raw))
    # Kafka walks every record (DefaultRecord.readFrom): InvalidRecordException -> INVALID_RECORD
    for cfg in (LogConfig(), LogConfig(cleanup_policy=("compact",)), LogConfig(compression_type="gzip")):
        expect(ErrorCode.INVALID_RECORD, bytes(raw), cfg)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_mutation_gives_a_kafka_error_or_a_valid_result(data: st.DataObject) -> None:
    """Bad input yields a Kafka error code, never another exception (hypothesis-driven mutations)."""
    codec = data.draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]))
    raw = bytearray(client_batch(data.draw(st.integers(1, 4)), codec))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        write_crc(raw, 0, len(raw))
    cut = data.draw(st.integers(0, len(raw)))
    cfg = data.draw(st.sampled_from([LogConfig(), LogConfig(cleanup_policy=("compact",)),
                                     LogConfig(compression_type="zstd")]))
    try:
        result = validate_records(bytes(raw[:cut] if cut else raw), cfg, 5, 0, NOW)
    except KafkaError as e:
        assert e.code in {ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP,
                          ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
    else:
        h = read_header(result.records)
        assert h.base_offset == 5 and crc_is_valid(result.records, 0, h)
        # accepted means readable: a client's decoder walks every record of it without error. Header keys are
        # strings that Kafka decodes leniently (invalid UTF-8 becomes U+FFFD); kafka-python decodes strictly, so
        # such a batch is counted with our own record iterator instead (kafka-python 3 wraps the UnicodeDecodeError
        # in its CorruptRecordError).
        try:
            count = len(list(DefaultRecordBatch(bytes(result.records))))
        except (UnicodeDecodeError, KafkaPythonCorruptRecordError) as e:
            if not isinstance(e, UnicodeDecodeError) and not isinstance(e.__context__, UnicodeDecodeError):
                raise
            count = len(list(iter_records(bytes(result.records), 0)))
        assert count == h.records_count
