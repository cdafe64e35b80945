"""The few fields of an OTLP `MetricsData` protobuf (opentelemetry-proto metrics/v1) that KIP-714 pushes carry
and the broker exposes: metric name, gauge and sum number data points with their attributes.

A small wire-format reader rather than `opentelemetry-proto` + `protobuf`: two dependencies (and protobuf's
C/upb runtime) for ten fields, and the input is untrusted bytes whose size the caller already bounded
(`telemetry.max.bytes`); unknown fields and metric kinds (histograms, summaries) are skipped as protobuf does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

_DOUBLE = struct.Struct("<d")
_SFIXED64 = struct.Struct("<q")

# Sum.aggregation_temporality (AggregationTemporality enum)
DELTA, CUMULATIVE = 1, 2


class OtlpDecodeError(ValueError):
    """The bytes are not a well-formed protobuf message."""


@dataclass(frozen=True)
class NumberPoint:
    metric: str  # OTLP metric name, e.g. org.apache.kafka.producer.record.queue.time.avg
    kind: str  # "gauge" or "sum"
    value: float
    attributes: tuple[tuple[str, str], ...]
    temporality: int = 0  # sums: DELTA or CUMULATIVE
    monotonic: bool = False


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise OtlpDecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise OtlpDecodeError("varint too long")


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value): varints and fixed ints as int, length-delimited as a view."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise OtlpDecodeError("truncated fixed64")
            value = int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise OtlpDecodeError("truncated length-delimited field")
            value = buf[pos:pos + size]
            pos += size
        elif wire == 5:
            if pos + 4 > len(buf):
                raise OtlpDecodeError("truncated fixed32")
            value = int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise OtlpDecodeError(f"unsupported wire type {wire}")
        if number == 0:
            raise OtlpDecodeError("field number 0")
        yield number, wire, value


def _text(value: int | memoryview) -> str:
    if not isinstance(value, memoryview):
        raise OtlpDecodeError("expected a string")
    return bytes(value).decode("utf-8", "replace")


def _any_value(buf: memoryview) -> str:
    """AnyValue as a label string: string_value=1, bool_value=2, int_value=3, double_value=4."""
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 2:
            return _text(value)
        if number == 2 and wire == 0:
            return "true" if value else "false"
        if number == 3 and wire == 0:
            assert isinstance(value, int)
            return str(value - (1 << 64) if value >= 1 << 63 else value)
        if number == 4 and wire == 1:
            assert isinstance(value, int)
            return repr(_DOUBLE.unpack(value.to_bytes(8, "little"))[0])
    return ""


def _attributes(views: list[memoryview]) -> tuple[tuple[str, str], ...]:
    out = []
    for kv in views:  # KeyValue: key=1, value=2
        key, val = "", ""
        for number, wire, value in _fields(kv):
            if number == 1 and wire == 2:
                key = _text(value)
            elif number == 2 and wire == 2:
                assert isinstance(value, memoryview)
                val = _any_value(value)
        out.append((key, val))
    return tuple(sorted(out))


def _number_point(buf: memoryview) -> tuple[float, tuple[tuple[str, str], ...]] | None:
    """NumberDataPoint: as_double=4 (fixed64), as_int=6 (sfixed64), attributes=7."""
    number_value: float | None = None
    attrs: list[memoryview] = []
    for number, wire, value in _fields(buf):
        if number == 4 and wire == 1:
            assert isinstance(value, int)
            number_value = _DOUBLE.unpack(value.to_bytes(8, "little"))[0]
        elif number == 6 and wire == 1:
            assert isinstance(value, int)
            number_value = float(_SFIXED64.unpack(value.to_bytes(8, "little"))[0])
        elif number == 7 and wire == 2:
            assert isinstance(value, memoryview)
            attrs.append(value)
    return None if number_value is None else (number_value, _attributes(attrs))


def _metric(buf: memoryview) -> Iterator[NumberPoint]:
    """Metric: name=1, gauge=5, sum=7 (other kinds are skipped)."""
    name = ""
    bodies: list[tuple[str, memoryview]] = []
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 2:
            name = _text(value)
        elif number in (5, 7) and wire == 2:
            assert isinstance(value, memoryview)
            bodies.append(("gauge" if number == 5 else "sum", value))
    for kind, body in bodies:
        temporality, monotonic = 0, False
        points: list[memoryview] = []
        for number, wire, value in _fields(body):  # Gauge/Sum: data_points=1; Sum: temporality=2, monotonic=3
            if number == 1 and wire == 2:
                assert isinstance(value, memoryview)
                points.append(value)
            elif number == 2 and wire == 0 and kind == "sum":
                assert isinstance(value, int)
                temporality = value
            elif number == 3 and wire == 0 and kind == "sum":
                monotonic = bool(value)
        for point in points:
            decoded = _number_point(point)
            if decoded is not None:
                yield NumberPoint(name, kind, decoded[0], decoded[1], temporality, monotonic)


def _submessages(buf: memoryview, field_number: int) -> Iterator[memoryview]:
    for number, wire, value in _fields(buf):
        if number == field_number and wire == 2:
            assert isinstance(value, memoryview)
            yield value


def number_points(data: bytes | memoryview) -> list[NumberPoint]:
    """Every gauge and sum data point of a MetricsData message (resource_metrics=1 → scope_metrics=2 →
    metrics=2). Raises OtlpDecodeError on malformed bytes."""
    out: list[NumberPoint] = []
    for resource_metrics in _submessages(memoryview(data), 1):
        for scope_metrics in _submessages(resource_metrics, 2):
            for metric in _submessages(scope_metrics, 2):
                out.extend(_metric(metric))
    return out
