"""Properties every schema type keeps: the stored text (canonical or normalized) parses back to itself, and no
input makes parsing fail with anything but InvalidSchema (the server turns that into 42201)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.schema_registry import test_avro_compat, test_json_schema_compat, test_protobuf_compat
from tidelog.schema_registry.schemas import InvalidSchema, parse_schema


def _texts() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for _, old, new, _ in test_avro_compat.PAIRS:
        out += [("AVRO", json.dumps(old)), ("AVRO", json.dumps(new))]
    for _, old, new, _ in test_json_schema_compat.PAIRS:
        out += [("JSON", json.dumps(old)), ("JSON", json.dumps(new))]
    for _, old, new, _ in test_protobuf_compat.PAIRS:
        out += [("PROTOBUF", f'syntax = "proto3";\npackage acme;\n{old}'), ("PROTOBUF", f'syntax = "proto3";\n{new}')]
    return out


TEXTS = _texts()


@pytest.mark.parametrize("schema_type,text", TEXTS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(TEXTS)])
def test_canonical_and_normalized_texts_parse_back_to_themselves(schema_type: str, text: str) -> None:
    parsed = parse_schema(schema_type, text)
    canonical = parse_schema(schema_type, parsed.canonical())
    assert canonical.canonical() == parsed.canonical()
    normalized = parse_schema(schema_type, parsed.normalized())
    assert normalized.normalized() == parsed.normalized()
    assert normalized.canonical() == parsed.normalized()  # normalizing a normalized schema changes nothing


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(
        ["int", "string", "record", "enum", "array", "map", "fixed", "null", "object", "X", "a.b", "", "#/x"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "name", "namespace", "fields", "items", "values", "symbols", "size", "default",
                         "aliases", "properties", "required", "additionalProperties", "$ref", "enum", "oneOf",
                         "minimum", "maxLength", "logicalType"]), children, max_size=5),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON_VALUES, schema_type=st.sampled_from(["AVRO", "JSON"]))
def test_any_json_value_parses_or_is_invalid(value: Any, schema_type: str) -> None:
    try:
        parsed = parse_schema(schema_type, json.dumps(value))
    except InvalidSchema:
        return
    assert parse_schema(schema_type, parsed.canonical()).canonical() == parsed.canonical()


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet='message enum syntax="proto3"; {}=123 abcoptional repeated map<>,.\n', max_size=60))
def test_any_text_parses_as_protobuf_or_is_invalid(text: str) -> None:
    try:
        parse_schema("PROTOBUF", text)
    except InvalidSchema:
        pass


@pytest.mark.parametrize("schema_type", ["AVRO", "JSON"])
def test_deeply_nested_schema_is_invalid_not_a_crash(schema_type: str) -> None:
    deep = '{"type":"array","items":' * 5000 + '"int"' + "}" * 5000
    with pytest.raises(InvalidSchema):
        parse_schema(schema_type, deep)
