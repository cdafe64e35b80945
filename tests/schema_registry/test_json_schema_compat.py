"""JSON Schema in the schema library: meta-validation, canonical forms and Confluent's compatibility rules.

Each row is (old schema, new schema, the directions in which new is compatible with old) per Confluent's JSON
Schema rules (SchemaDiff with the default STRICT policy): BACKWARD diffs old -> new, FORWARD new -> old, and a
difference is compatible when Confluent lists its type as such. The content-model rows are the cases Confluent's
documentation spells out: an open model (additional properties allowed) may lose properties but not gain typed
ones; a closed model may gain optional ones but not lose any; a partially open one decides by its schema.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tidelog.schema_registry.schemas import (
    COMPATIBILITY_LEVELS,
    InvalidSchema,
    ParsedSchema,
    check_compatibility,
    parse_schema,
)


def js(value: Any, references: dict[str, Any] | None = None) -> ParsedSchema:
    refs = {name: json.dumps(schema) for name, schema in (references or {}).items()}
    return parse_schema("JSON", json.dumps(value), refs)


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required:
        out["required"] = required
    return out


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
CLOSED = {"additionalProperties": False}
B, F = "BACKWARD", "FORWARD"
BOTH = {B, F}
NEITHER: set[str] = set()

PAIRS: list[tuple[str, Any, Any, set[str]]] = [
    ("identical", obj({"a": STR}), obj({"a": STR}), BOTH),
    ("optional property added to an open model", obj({"a": STR}), obj({"a": STR, "b": INT}), {F}),
    ("property with an empty schema added to an open model", obj({"a": STR}), obj({"a": STR, "b": {}}), BOTH),
    ("property removed from an open model", obj({"a": STR, "b": INT}), obj({"a": STR}), {B}),
    ("optional property added to a closed model", obj({"a": STR}, **CLOSED), obj({"a": STR, "b": INT}, **CLOSED), {B}),
    ("required property added to a closed model", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": INT}, ["b"], **CLOSED), NEITHER),
    ("required property with default added to a closed model", obj({"a": STR}, **CLOSED),
     obj({"a": STR, "b": {"type": "integer", "default": 0}}, ["b"], **CLOSED), {B}),
    ("property removed from a closed model", obj({"a": STR, "b": INT}, **CLOSED), obj({"a": STR}, **CLOSED), {F}),
    ("property added, covered by a partially open model", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": STR}, additionalProperties=STR), BOTH),
    ("property added, not covered by a partially open model", obj({"a": STR}, additionalProperties=STR),
     obj({"a": STR, "b": INT}, additionalProperties=STR), NEITHER),
    ("property added, covered by patternProperties", obj({"a": STR}, patternProperties={"^x_": INT}),
     obj({"a": STR, "x_b": INT}, patternProperties={"^x_": INT}), BOTH),
    ("existing property made required", obj({"a": STR}), obj({"a": STR}, ["a"]), {F}),
    ("existing property made required with a default", obj({"a": STR}),
     obj({"a": {"type": "string", "default": ""}}, ["a"]), BOTH),
    ("model closed", obj({"a": STR}), obj({"a": STR}, **CLOSED), {F}),
    ("property type changed", obj({"a": STR}), obj({"a": INT}), NEITHER),
    ("integer widened to number", obj({"a": INT}), obj({"a": NUM}), {B}),
    ("type widened to a union", obj({"a": STR}), obj({"a": {"type": ["string", "null"]}}), {B}),
    ("oneOf gains a subschema", {"oneOf": [STR, INT]}, {"oneOf": [STR, INT, {"type": "boolean"}]}, {B}),
    ("oneOf subschemas replaced", {"oneOf": [STR, INT]}, {"oneOf": [{"type": "boolean"}, {"type": "null"}]}, NEITHER),
    ("anyOf to allOf (Confluent: allOf -> anyOf is an extension)", {"anyOf": [STR, INT]}, {"allOf": [STR, INT]}, {F}),
    ("enum extended", {"enum": ["A", "B"]}, {"enum": ["A", "B", "C"]}, {B}),
    ("enum changed", {"enum": ["A", "B"]}, {"enum": ["A", "C"]}, NEITHER),
    ("const changed", {"const": 1}, {"const": 2}, NEITHER),
    ("maxLength increased", {"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, {B}),
    ("minLength added", STR, {"type": "string", "minLength": 1}, {F}),
    ("pattern changed", {"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, NEITHER),
    ("maximum decreased", {"type": "number", "maximum": 10}, {"type": "number", "maximum": 5}, {F}),
    ("minimum removed", {"type": "number", "minimum": 0}, NUM, {B}),
    ("exclusiveMaximum increased", {"type": "number", "exclusiveMaximum": 5},
     {"type": "number", "exclusiveMaximum": 10}, {B}),
    ("multipleOf reduced", {"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}, {B}),
    ("multipleOf changed", {"type": "number", "multipleOf": 3}, {"type": "number", "multipleOf": 2}, NEITHER),
    ("array items type changed", {"type": "array", "items": STR}, {"type": "array", "items": INT}, NEITHER),
    ("array maxItems increased", {"type": "array", "items": STR, "maxItems": 2},
     {"type": "array", "items": STR, "maxItems": 3}, {B}),
    ("array uniqueItems added", {"type": "array", "items": STR}, {"type": "array", "items": STR, "uniqueItems": True}, {F}),
    ("tuple item added to a closed tuple", {"type": "array", "items": [STR], "additionalItems": False},
     {"type": "array", "items": [STR, INT], "additionalItems": False}, {B}),
    ("tuple item added to an open tuple", {"type": "array", "items": [STR]}, {"type": "array", "items": [STR, INT]}, {F}),
    ("tuple item added, covered by additionalItems", {"type": "array", "items": [STR], "additionalItems": STR},
     {"type": "array", "items": [STR, STR], "additionalItems": STR}, BOTH),
    ("tuple item added, not covered by additionalItems", {"type": "array", "items": [STR], "additionalItems": STR},
     {"type": "array", "items": [STR, NUM], "additionalItems": STR}, NEITHER),
    ("2020-12 prefixItems gains an item covered by items",
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "prefixItems": [STR], "items": STR},
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "prefixItems": [STR, STR],
      "items": STR}, BOTH),
    ("2020-12 prefixItems gains an item covered by unevaluatedItems",
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "prefixItems": [STR],
      "unevaluatedItems": STR},
     {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "prefixItems": [STR, NUM],
      "unevaluatedItems": STR}, NEITHER),
    ("minContains increased", {"type": "array", "contains": STR, "minContains": 1},
     {"type": "array", "contains": STR, "minContains": 2}, {F}),
    ("dependency array extended", obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b"]}),
     obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b", "c"]}), {F}),
    ("dependency schema changed", obj({"a": STR}, dependencies={"a": {"properties": {"b": STR}}}),
     obj({"a": STR}, dependencies={"a": {"properties": {"b": INT}}}), NEITHER),
    ("unevaluatedProperties closed", obj({"a": STR}), obj({"a": STR}, unevaluatedProperties=False), {F}),
    ("nested object gains a required property", obj({"o": obj({"x": STR}, **CLOSED)}),
     obj({"o": obj({"x": STR, "y": STR}, ["y"], **CLOSED)}), NEITHER),
    ("type changed through a local $ref",
     {"definitions": {"T": STR}, "type": "object", "properties": {"a": {"$ref": "#/definitions/T"}}},
     {"definitions": {"T": INT}, "type": "object", "properties": {"a": {"$ref": "#/definitions/T"}}}, NEITHER),
    ("recursive schema unchanged",
     {"definitions": {"N": obj({"next": {"$ref": "#/definitions/N"}})}, "$ref": "#/definitions/N"},
     {"definitions": {"N": obj({"next": {"$ref": "#/definitions/N"}})}, "$ref": "#/definitions/N"}, BOTH),
    ("not excludes more (the new schema accepts less)", {"not": {"type": "string"}},
     {"not": {"type": ["string", "null"]}}, {F}),
]


def expected_compatible(level: str, directions: set[str]) -> bool:
    if level == "NONE":
        return True
    need = {B} if level.startswith(B) else {F} if level.startswith(F) else {B, F}
    return need <= directions


@pytest.mark.parametrize("case,old,new,directions", PAIRS, ids=[p[0] for p in PAIRS])
def test_pair_verdict_per_level(case: str, old: Any, new: Any, directions: set[str]) -> None:
    old_s, new_s = js(old), js(new)
    for level in COMPATIBILITY_LEVELS:
        reasons = check_compatibility(level, new_s, [old_s])
        assert (not reasons) == expected_compatible(level, directions), (case, level, reasons)


def test_messages_are_confluents_verbose_wording() -> None:
    old = js(obj({"a": STR}))
    new = js(obj({"a": STR, "b": INT}))
    assert check_compatibility("BACKWARD", new, [old], versions=[2]) == [
        '{errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The new schema has an open content '
        "model and has a property or item at path '#/properties/b' which is missing in the old schema'}",
        "{oldSchemaVersion: 2}",
        f"{{oldSchema: '{old.canonical()}'}}",
    ]
    forward = check_compatibility("FORWARD", js(obj({"a": INT})), [old])
    assert forward[0] == (
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/a\' is different between the old '
        "schema and the new schema'}"
    )
    closed = check_compatibility("BACKWARD", js(obj({"a": STR, "b": INT}, ["b"], **CLOSED)), [js(obj({"a": STR}, **CLOSED))])
    assert closed[0].startswith('{errorType:"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", description:"The new '
                                "schema has an unopen content model and has a required property at path "
                                "'#/properties/b' which is missing in the old schema")
    bound = check_compatibility("BACKWARD", js({"type": "number", "maximum": 5}), [js({"type": "number", "maximum": 9})])
    assert "The value at path '#/maximum' in the new schema is less than its value in the old schema" in bound[0]


def test_references_resolve_across_schemas() -> None:
    customer_v1 = obj({"name": STR}, **CLOSED)
    customer_v2 = obj({"name": STR, "age": INT}, ["age"], **CLOSED)
    order = obj({"customer": {"$ref": "customer.json"}})
    v1 = js(order, {"customer.json": customer_v1})
    v2 = js(order, {"customer.json": customer_v2})
    assert v1.canonical() == v2.canonical()  # the referencing text is the same; the references differ
    reasons = check_compatibility("BACKWARD", v2, [v1])
    assert reasons and "#/properties/customer/properties/age" in reasons[0]


def test_canonical_keeps_key_order_and_normalized_sorts() -> None:
    a = parse_schema("JSON", '{"type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}')
    b = parse_schema("JSON", '{"properties":{"b":{"type":"string"},"a":{"type":"integer"}},"type":"object"}')
    assert a.canonical() == '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}'
    assert a.canonical() != b.canonical()
    assert a.normalized() == b.normalized() == (
        '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    )
    assert js(obj({"a": STR})).canonical() == js(obj({"a": STR})).canonical()


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[1, 2]",
        "42",
        '{"type": 3}',
        '{"type": "strin"}',
        '{"type": "string", "minLength": -1}',
        '{"properties": []}',
        '{"$ref": "#/definitions/Missing"}',
        '{"$ref": "unregistered.json"}',
        '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "required": "a"}',
    ],
)
def test_invalid_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse_schema("JSON", text)


def test_boolean_schemas_and_drafts_parse() -> None:
    assert parse_schema("JSON", "true").canonical() == "true"
    s = parse_schema("JSON", '{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", '
                             '"prefixItems": [{"type": "string"}], "$defs": {"x": {"type": "string"}}}')
    assert s.schema_type == "JSON"
