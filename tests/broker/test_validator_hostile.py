"""LogValidator on hostile batches, in process: every kind issue #10 names gets Kafka's error, bombs are refused
with bounded memory, and unused attribute bits are accepted as Kafka accepts them."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import pytest
from hostile_batches import CODECS, bomb, hostile, records, unused_attribute_bits, with_codec

from tests.walk_impls import walk_impl  # noqa: F401 - autouse: the C walk and the Python fallback
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import _install_lazy_kafka_package
from tidelog.protocol.records import GZIP, LZ4, ZSTD, iter_records
from tidelog.storage.log_validator import validate_records

_install_lazy_kafka_package()
from kafka.record.default_records import DefaultRecordBatch  # noqa: E402

NOW = 1_700_000_100_000
CASES = hostile()


@pytest.mark.parametrize(("name", "build", "code"), CASES, ids=[c[0] for c in CASES])
def test_hostile_batch_gets_kafkas_error(name: str, build: Callable[[], bytes], code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as info:
        validate_records(build(), LogConfig(), 0, 0, NOW)
    assert info.value.code == code, f"{name}: {info.value!r}"


@pytest.mark.parametrize("codec", CODECS.values(), ids=list(CODECS))
def test_well_formed_batches_of_every_codec_are_accepted_and_readable(codec: int) -> None:
    raw = with_codec(codec, records(40, value=b"v" * 300), 40)
    out = bytes(validate_records(raw, LogConfig(), 100, 0, NOW).records)
    assert [r.offset for r in DefaultRecordBatch(out)] == list(range(100, 140))
    assert [r.key for r in iter_records(out)] == [b"key-%d" % i for i in range(40)]


@pytest.mark.parametrize("codec", CODECS.values(), ids=list(CODECS))
def test_unused_attribute_bits_are_ignored_as_kafka_does(codec: int) -> None:
    out = bytes(validate_records(unused_attribute_bits(codec), LogConfig(), 0, 0, NOW).records)
    assert [r.value for r in DefaultRecordBatch(out)] == [b"value"] * 3


@pytest.mark.parametrize(("codec", "size"), [(ZSTD, 1 << 30), (GZIP, 200 << 20), (LZ4, 200 << 20)],
                         ids=["zstd-1GiB", "gzip-200MiB", "lz4-200MiB"])
def test_a_bomb_is_refused_without_allocating_its_expanded_size(codec: int, size: int) -> None:
    raw = bomb(codec, size)  # one record whose value expands to `size` zero bytes
    assert len(raw) < 1 << 20  # fits max.message.bytes
    tracemalloc.start()
    try:
        with pytest.raises(KafkaError) as info:
            validate_records(raw, LogConfig(), 0, 0, NOW)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.code == ErrorCode.INVALID_RECORD
    assert peak < 8 << 20, f"peak {peak} bytes while refusing a {size}-byte bomb"


def test_a_large_value_under_the_bound_is_walked_in_bounded_memory_and_accepted() -> None:
    raw = bomb(ZSTD, 20 << 20)  # a legitimate (if odd) 20 MiB record
    tracemalloc.start()
    try:
        result = validate_records(raw, LogConfig(), 0, 0, NOW)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.record_count == 1
    assert peak < (8 << 20) + 2 * len(raw)
    with pytest.raises(KafkaError) as info:
        validate_records(raw, LogConfig(), 0, 0, NOW, max_decompressed_bytes=10 << 20)
    assert info.value.code == ErrorCode.INVALID_RECORD
