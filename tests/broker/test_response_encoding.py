"""`tidelog.protocol.messages.encode_response`: a response is encoded by walking its schema until walking its message
version has cost about a compile (or it was sent COMPILE_AFTER times), then by kafka-python's compiled encoder. Both
must write the same bytes for every response of every served API and version (tagged fields set, nullable fields
null and not)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tidelog.broker.apis import API_TABLE
from tidelog.protocol import messages
from tidelog.protocol.messages import COMPILE_AFTER, encode_response, response_class

_INTS = {"int8": -7, "int16": 300, "uint16": 65000, "int32": -70_000, "int64": 1_700_000_000_123}


def _value(field: Any, version: int, nulls: bool, depth: int) -> Any:
    if nulls and field.nullable_for_version_q(version):
        return None
    if field.is_struct_array():
        return [_struct(field, version, nulls, depth + 1) for _ in range(2)]
    if field.is_struct():
        return _struct(field, version, nulls, depth + 1)
    if field.is_array():
        return [_value(field.array_of, version, False, depth + 1) for _ in range(2)]
    t = field.type_str
    if t in _INTS:
        return _INTS[t] + depth
    return {"bool": True, "float64": 2.5, "string": f"s{depth}-é", "bytes": b"\x00\x01\x02",
            "records": b"\x07" * 9, "uuid": uuid.UUID(int=0x1234_5678 + depth), "bitfield": {3, 8}}[t]


def _values(fields: Any, version: int, nulls: bool, depth: int) -> dict[str, Any]:
    # every field of the version, the tagged ones too (a non-default tagged value is written)
    return {f.name: _value(f, version, nulls, depth) for f in fields if f.for_version_q(version)}


def _struct(struct: Any, version: int, nulls: bool, depth: int) -> Any:
    inner = getattr(struct, "array_of", struct)  # a struct array's element struct holds the data classes
    return struct(**_values(inner._fields, version, nulls, depth))


def _response(api_key: int, version: int, nulls: bool) -> Any:
    cls = response_class(api_key)
    return cls[version](**_values(cls._struct._fields, version, nulls, 0))


def _served() -> list[tuple[int, int]]:
    cases = []
    for entry in API_TABLE:
        try:
            cls = response_class(entry.key)
        except KeyError:
            continue  # hand-encoded only
        for v in range(entry.min_version, entry.max_version + 1):
            try:
                cls[v]
            except (KeyError, IndexError, ValueError):
                continue
            cases.append((int(entry.key), v))
    return cases


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("api_key", "version"), _served())
def test_schema_walk_writes_what_the_compiled_encoder_writes(api_key: int, version: int, nulls: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "_walked", {})
    response = _response(api_key, version, nulls)
    walked = encode_response(response, version)
    assert bytes(walked) == bytes(response.encode(version=version))


def test_a_message_version_is_compiled_once_it_has_been_sent_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "_walked", {})
    cls = response_class(3)[1]  # Metadata v1
    response = _response(3, 1, nulls=False)
    compiled = cls._struct._compiled_encoders
    compiled.pop((1, False, False), None)
    first = bytes(encode_response(response, 1))
    assert (1, False, False) not in compiled  # the first send walks the schema: nothing compiled
    sent = [bytes(encode_response(response, 1)) for _ in range(COMPILE_AFTER)]
    assert (1, False, False) in compiled  # at the latest after COMPILE_AFTER sends
    assert set(sent) == {first}


def test_a_message_version_whose_walks_cost_a_compile_is_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    # a large response (e.g. Metadata of a thousand partitions) walks for milliseconds: compiled at its next send
    monkeypatch.setattr(messages, "_walked", {})
    monkeypatch.setattr(messages, "WALK_BUDGET_S", 1e-9)
    cls = response_class(3)[12]
    response = _response(3, 12, nulls=False)
    compiled = cls._struct._compiled_encoders
    compiled.pop((12, True, True), None)
    first = bytes(encode_response(response, 12))
    assert (12, True, True) not in compiled
    assert bytes(encode_response(response, 12)) == first
    assert (12, True, True) in compiled
