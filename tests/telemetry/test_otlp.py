"""The OTLP MetricsData reader on the bytes clients push: gauges, sums (int and double points, attributes),
skipped kinds, and hostile bytes (only OtlpDecodeError, never another exception)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.protocol.otlp import CUMULATIVE, DELTA, NumberPoint, OtlpDecodeError, number_points

from .test_client_telemetry import _ld, _varint, otlp_gauge


def otlp_sum(name: str, value: int, temporality: int, monotonic: bool) -> bytes:
    point = _varint(6 << 3 | 1) + struct.pack("<q", value)  # as_int (sfixed64)
    body = _ld(1, point) + _varint(2 << 3) + _varint(temporality) + _varint(3 << 3) + _varint(int(monotonic))
    histogram = _ld(1, b"ignored.histogram") + _ld(9, _ld(1, b"\x09" + b"\x00" * 8))
    metric = _ld(1, name.encode()) + _ld(7, body)
    return _ld(1, _ld(1, _ld(1, b"")) + _ld(2, _ld(1, b"scope") + _ld(2, metric) + _ld(2, histogram)))


def test_gauge_and_sum_points() -> None:
    data = otlp_gauge("a.b", 1.5) + otlp_sum("c.d", -3, DELTA, True) + otlp_sum("e", 7, CUMULATIVE, False)
    assert number_points(data) == [
        NumberPoint("a.b", "gauge", 1.5, (("node_id", "1"),)),
        NumberPoint("c.d", "sum", -3.0, (), DELTA, True),
        NumberPoint("e", "sum", 7.0, (), CUMULATIVE, False),
    ]


def test_truncated_bytes_are_refused() -> None:
    data = otlp_gauge("a.b", 1.5)  # one outer field: any cut leaves a length pointing past the end
    for cut in range(1, len(data)):
        with pytest.raises(OtlpDecodeError):
            number_points(data[:cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_hostile_bytes_raise_only_decode_errors(data: bytes) -> None:
    try:
        points = number_points(data)
    except OtlpDecodeError:
        return
    assert all(isinstance(p, NumberPoint) for p in points)
