"""AVRO in the schema library: parsing, Confluent's canonical and normalized forms, and compatibility verdicts.

Each compatibility row is (writer/old schema, new schema, the levels under which new may follow old). The verdicts
are Avro's schema-resolution rules (the spec's "Schema Resolution"; Avro Java's SchemaCompatibility) as Confluent
applies them: BACKWARD = the new schema reads data written with the old one, FORWARD = the old one reads data
written with the new one, FULL = both.
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


def avro(value: Any, references: dict[str, str] | None = None) -> ParsedSchema:
    """Parse a schema given as a JSON value (a primitive's name, a dict or a list)."""
    return parse_schema("AVRO", json.dumps(value), references or {})


def avro_text(text: str) -> ParsedSchema:
    return parse_schema("AVRO", text)


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "com.example", "fields": list(fields), **extra}


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(*symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": "Colour", "symbols": list(symbols), **extra}


B, F = "BACKWARD", "FORWARD"
BOTH = {B, F}
NEITHER: set[str] = set()

# (case, old, new, directions in which new is compatible with old)
PAIRS: list[tuple[str, Any, Any, set[str]]] = [
    ("identical", record(f("id", "int")), record(f("id", "int")), BOTH),
    ("field added with default", record(f("id", "int")), record(f("id", "int"), f("n", "string", default="")), BOTH),
    ("field added without default", record(f("id", "int")), record(f("id", "int"), f("n", "string")), {F}),
    ("field removed (it had no default)", record(f("id", "int"), f("n", "string")), record(f("id", "int")), {B}),
    ("field removed (it had a default)", record(f("id", "int"), f("n", "string", default="")), record(f("id", "int")), BOTH),
    ("union default may match any branch (Avro 1.12)", record(f("id", "int")),
     record(f("id", "int"), f("n", ["null", "string"], default="null")), BOTH),
    ("nullable field added with null default", record(f("id", "int")),
     record(f("id", "int"), f("n", ["null", "string"], default=None)), BOTH),
    ("int promoted to long", record(f("x", "int")), record(f("x", "long")), {B}),
    ("long narrowed to int", record(f("x", "long")), record(f("x", "int")), {F}),
    ("int promoted to float", record(f("x", "int")), record(f("x", "float")), {B}),
    ("long promoted to double", record(f("x", "long")), record(f("x", "double")), {B}),
    ("float promoted to double", record(f("x", "float")), record(f("x", "double")), {B}),
    ("string to bytes", record(f("x", "string")), record(f("x", "bytes")), BOTH),
    ("int to string", record(f("x", "int")), record(f("x", "string")), NEITHER),
    ("boolean to int", "boolean", "int", NEITHER),
    ("enum symbol added", enum("RED", "GREEN"), enum("RED", "GREEN", "BLUE"), {B}),
    ("enum symbol removed", enum("RED", "GREEN", "BLUE"), enum("RED", "GREEN"), {F}),
    ("enum symbol removed, new has enum default", enum("RED", "GREEN", "BLUE"), enum("RED", "GREEN", default="RED"), BOTH),
    ("enum symbol added, old has enum default", enum("RED", "GREEN", default="RED"),
     enum("RED", "GREEN", "BLUE", default="RED"), BOTH),
    ("enum renamed", enum("RED"), {**enum("RED"), "name": "Color"}, NEITHER),
    ("union branch added", record(f("x", ["null", "string"])), record(f("x", ["null", "string", "int"])), {B}),
    ("union branch removed", record(f("x", ["null", "string", "int"])), record(f("x", ["null", "string"])), {F}),
    ("type widened to a union", record(f("x", "string")), record(f("x", ["null", "string"])), {B}),
    ("union narrowed to a type", record(f("x", ["null", "string"])), record(f("x", "string")), {F}),
    ("union branch promoted", record(f("x", ["null", "int"])), record(f("x", ["null", "long"])), {B}),
    ("record renamed", record(f("id", "int")), record(f("id", "int"), name="Person"), NEITHER),
    ("record renamed with alias to the old name", record(f("id", "int")),
     record(f("id", "int"), name="Person", aliases=["com.example.User"]), {B}),
    ("field renamed", record(f("id", "int")), record(f("key", "int")), NEITHER),
    ("field renamed with alias", record(f("id", "int")), record(f("key", "int", aliases=["id"])), {B}),
    ("fixed size changed", {"type": "fixed", "name": "H", "size": 16}, {"type": "fixed", "name": "H", "size": 32}, NEITHER),
    ("fixed identical", {"type": "fixed", "name": "H", "size": 16}, {"type": "fixed", "name": "H", "size": 16}, BOTH),
    ("array items promoted", {"type": "array", "items": "int"}, {"type": "array", "items": "long"}, {B}),
    ("map values changed", {"type": "map", "values": "int"}, {"type": "map", "values": "string"}, NEITHER),
    ("array to map", {"type": "array", "items": "int"}, {"type": "map", "values": "int"}, NEITHER),
    ("nested record field added without default",
     record(f("a", record(f("x", "int"), name="Inner"))),
     record(f("a", record(f("x", "int"), f("y", "int"), name="Inner"))), {F}),
    ("nested record field added with default",
     record(f("a", record(f("x", "int"), name="Inner"))),
     record(f("a", record(f("x", "int"), f("y", "int", default=0), name="Inner"))), BOTH),
    ("recursive type unchanged",
     {"type": "record", "name": "Node", "fields": [f("v", "int"), f("next", ["null", "Node"], default=None)]},
     {"type": "record", "name": "Node", "fields": [f("v", "int"), f("next", ["null", "Node"], default=None)]}, BOTH),
    ("recursive type gains a defaulted field",
     {"type": "record", "name": "Node", "fields": [f("v", "int"), f("next", ["null", "Node"], default=None)]},
     {"type": "record", "name": "Node",
      "fields": [f("v", "int"), f("next", ["null", "Node"], default=None), f("w", "long", default=0)]}, BOTH),
    ("logical type added on the same physical type", "long", {"type": "long", "logicalType": "timestamp-millis"}, BOTH),
    ("field order and docs changed",
     record(f("a", "int"), f("b", "string")), record(f("b", "string", doc="the b"), f("a", "int")), BOTH),
]


def expected_compatible(level: str, directions: set[str]) -> bool:
    if level == "NONE":
        return True
    need = {B} if level.startswith(B) else {F} if level.startswith(F) else {B, F}
    return need <= directions


@pytest.mark.parametrize("case,old,new,directions", PAIRS, ids=[p[0] for p in PAIRS])
def test_pair_verdict_per_level(case: str, old: Any, new: Any, directions: set[str]) -> None:
    old_s, new_s = avro(old), avro(new)
    for level in COMPATIBILITY_LEVELS:
        reasons = check_compatibility(level, new_s, [old_s])
        assert (not reasons) == expected_compatible(level, directions), (case, level, reasons)
        if reasons and not level.startswith("FULL"):  # FULL appends it to its BACKWARD half only, as Confluent
            assert reasons[-1] == f"{{oldSchema: '{old_s.canonical()}'}}"


def test_messages_are_confluents_verbose_wording() -> None:
    old = avro(record(f("id", "int")))
    new = avro(record(f("id", "int"), f("email", "string")))
    assert check_compatibility("BACKWARD", new, [old], versions=[3]) == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'email' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema', additionalInfo:'email'}",
        "{oldSchemaVersion: 3}",
        f"{{oldSchema: '{old.canonical()}'}}",
    ]
    narrowed = avro(record(f("id", "long")))
    forward = check_compatibility("FORWARD", narrowed, [old])
    assert forward[0] == (
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the old schema does "
        "not match with the new schema', additionalInfo:'reader type: INT not compatible with writer type: LONG'}"
    )
    removed = check_compatibility("BACKWARD", avro(enum("RED")), [avro(enum("RED", "GREEN", "BLUE"))])
    assert removed[0] == (
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[BLUE, GREEN]' at "
        "path '/symbols' in the old schema', additionalInfo:'[BLUE, GREEN]'}"
    )
    union = check_compatibility("BACKWARD", avro(["null", "string"]), [avro(["null", "string", "int"])])
    assert union[0] == (
        "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union field at "
        "path '/2' in the old schema', additionalInfo:'reader union lacking writer type: INT'}"
    )
    fixed = check_compatibility(
        "BACKWARD", avro({"type": "fixed", "name": "H", "size": 4}), [avro({"type": "fixed", "name": "H", "size": 2})]
    )
    assert fixed[0].startswith("{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path '/size'")
    assert fixed[0].endswith("additionalInfo:'expected: 2, found: 4'}")
    renamed = check_compatibility("BACKWARD", avro(enum("A") | {"name": "X"}), [avro(enum("A"))])
    assert renamed[0] == (
        "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', "
        "additionalInfo:'expected: Colour'}"
    )


def test_full_reports_both_directions_and_the_old_schema_once() -> None:
    old = avro(record(f("id", "int"), f("gone", "string")))
    new = avro(record(f("id", "int"), f("added", "string")))
    reasons = check_compatibility("FULL", new, [old], versions=[1])
    kinds = [r.split("'")[1] for r in reasons if r.startswith("{errorType")]
    # FORWARD half (the old schema reads new data: "gone" has no default) comes first, then the BACKWARD half
    assert kinds == ["READER_FIELD_MISSING_DEFAULT_VALUE", "READER_FIELD_MISSING_DEFAULT_VALUE"]
    assert "'gone' at path '/fields/1' in the old schema" in reasons[0]
    assert "'added' at path '/fields/1' in the new schema" in reasons[1]
    assert reasons[2:] == ["{oldSchemaVersion: 1}", f"{{oldSchema: '{old.canonical()}'}}"]


def test_transitive_levels_check_every_previous_version() -> None:
    v1 = avro(record(f("id", "int")))
    v2 = avro(record(f("id", "int"), f("name", "string", default="")))
    v3 = avro(record(f("id", "int"), f("name", "string")))  # reads v2 data, not v1 data
    assert check_compatibility("BACKWARD", v3, [v1, v2]) == []
    transitive = check_compatibility("BACKWARD_TRANSITIVE", v3, [v1, v2], versions=[1, 2])
    assert transitive and transitive[-2] == "{oldSchemaVersion: 1}"
    assert check_compatibility("FULL", v3, [v1, v2]) == []
    assert check_compatibility("FULL_TRANSITIVE", v3, [v1, v2])
    # FORWARD: v1's reader ignores the new field; v2's reader has it
    assert check_compatibility("FORWARD_TRANSITIVE", v3, [v1, v2]) == []
    # non-transitive levels look at the latest only, whatever came before
    assert check_compatibility("FORWARD", avro(record(f("id", "long"))), [v1, avro(record(f("id", "double")))]) == []


def test_no_previous_schema_and_none_level_are_compatible() -> None:
    s = avro("int")
    assert check_compatibility("BACKWARD", s, []) == []
    assert check_compatibility("NONE", avro("string"), [s]) == []


def test_different_schema_type_is_incompatible() -> None:
    json_schema = parse_schema("JSON", '{"type":"string"}')
    assert check_compatibility("BACKWARD", avro("string"), [json_schema]) == [
        "Incompatible because of different schema type"
    ]


def test_unknown_level_is_refused() -> None:
    with pytest.raises(ValueError):
        check_compatibility("SIDEWAYS", avro("int"), [avro("int")])


# --- canonical and normalized forms ---------------------------------------------------------------------


def test_identical_schemas_canonicalise_equal() -> None:
    a = avro_text('{"type": "record", "name": "User", "namespace": "com.example",\n "fields": [{"name": "id", "type": "int"}]}')
    b = avro_text('{"fields":[{"type":"int","name":"id"}],"name":"com.example.User","type":"record"}')
    assert a.canonical() == b.canonical()
    assert a.canonical() == (
        '{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"int"}]}'
    )
    assert avro("string").canonical() == avro({"type": "string"}).canonical() == '"string"'
    assert a.canonical() != avro(record(f("id", "long"))).canonical()


def test_canonical_writes_named_types_once_and_namespaces_only_where_they_change() -> None:
    s = avro({
        "type": "record", "name": "a.b.Outer", "doc": "d",
        "fields": [
            {"name": "x", "type": {"type": "enum", "name": "E", "symbols": ["P", "Q"], "default": "P"}, "default": "Q"},
            {"name": "y", "type": "E", "order": "descending"},
            {"name": "z", "type": {"type": "fixed", "name": "other.F", "size": 2}},
            {"name": "w", "type": {"type": "long", "logicalType": "timestamp-millis"}, "custom": 1},
        ],
    })
    assert s.canonical() == (
        '{"type":"record","name":"Outer","namespace":"a.b","doc":"d","fields":['
        '{"name":"x","type":{"type":"enum","name":"E","symbols":["P","Q"],"default":"P"},"default":"Q"},'
        '{"name":"y","type":"E","order":"descending"},'
        '{"name":"z","type":{"type":"fixed","name":"F","namespace":"other","size":2}},'
        '{"name":"w","type":{"type":"long","logicalType":"timestamp-millis"},"custom":1}]}'
    )


def test_normalized_form_uses_full_names_and_sorted_props() -> None:
    a = avro({"type": "record", "name": "User", "namespace": "ns", "fields": [
        {"name": "id", "type": {"type": "string", "zeta": 1, "alpha": 2}, "doc": "the id"}]})
    b = avro({"fields": [{"doc": "the id", "type": {"alpha": 2, "type": "string", "zeta": 1}, "name": "id"}],
              "name": "ns.User", "type": "record"})
    assert a.canonical() != b.canonical()  # the props' order differs
    assert a.normalized_form() == b.normalized_form() == (  # type: ignore[attr-defined]
        '{"name":"ns.User","type":"record","fields":[{"name":"id","type":{"type":"string","alpha":2,"zeta":1},'
        '"order":"ascending","doc":"the id"}]}'
    )
    # what normalize=true stores: that form parsed and written canonically (normalize().canonicalString())
    assert a.normalized() == b.normalized() == (
        '{"type":"record","name":"User","namespace":"ns","fields":[{"name":"id","type":{"type":"string","alpha":2,'
        '"zeta":1},"doc":"the id"}]}'
    )
    assert avro({"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}).normalized() == (
        '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}'
    )


def test_normalize_then_canonical_keeps_props_and_drops_default_order() -> None:
    # Confluent stores normalize().canonicalString(): field keys in Avro's order, props after the reserved keys,
    # named types by short name in their namespace, "order" only when not ascending.
    text = json.dumps({
        "connect.name": "shop.Order", "namespace": "shop", "type": "record", "name": "Order",
        "fields": [
            {"default": None, "name": "line", "type": ["null", {
                "type": "record", "name": "Line", "connect.name": "shop.Line",
                "fields": [{"name": "at", "type": {"connect.version": 1, "type": "long", "connect.name": "x.Ts"}}]}]},
            {"name": "next", "type": ["null", "Line"], "default": None, "doc": "say \"hi\""},
        ],
    })
    expected = (
        '{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"line","type":["null",{"type":"record",'
        '"name":"Line","fields":[{"name":"at","type":{"type":"long","connect.version":1,"connect.name":"x.Ts"}}],'
        '"connect.name":"shop.Line"}],"default":null},{"name":"next","type":["null","Line"],"doc":"say \\"hi\\"",'
        '"default":null}],"connect.name":"shop.Order"}'
    )
    parsed = avro_text(text)
    assert parsed.canonical() == expected
    assert parsed.normalized() == (
        '{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"line","type":["null",{"type":"record",'
        '"name":"Line","fields":[{"name":"at","type":{"type":"long","connect.name":"x.Ts","connect.version":1}}],'
        '"connect.name":"shop.Line"}],"default":null},{"name":"next","type":["null","Line"],"doc":"say \\"hi\\"",'
        '"default":null}],"connect.name":"shop.Order"}'
    )


def test_references_are_known_names() -> None:
    address = json.dumps(record(f("street", "string"), name="Address"))
    user = avro(record(f("home", "com.example.Address"), f("work", "Address")), {"address.avsc": address})
    assert user.canonical() == (
        '{"type":"record","name":"User","namespace":"com.example","fields":'
        '[{"name":"home","type":"Address"},{"name":"work","type":"Address"}]}'
    )
    assert '"type":"com.example.Address"' in user.normalized_form()  # type: ignore[attr-defined]
    assert user.normalized() == user.canonical()
    # compatibility looks through the referenced record
    address2 = json.dumps(record(f("street", "string"), f("zip", "string"), name="Address"))
    user2 = avro(record(f("home", "com.example.Address"), f("work", "Address")), {"address.avsc": address2})
    assert check_compatibility("FORWARD", user2, [user]) == []
    assert check_compatibility("BACKWARD", user2, [user])


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "42",
        '{"type": "record"}',
        '{"type": "nosuchtype"}',
        '{"type": "record", "name": "1abc", "fields": []}',
        '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "int"}]}',
        '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
        '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "string", "default": null}]}',
        '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "Undefined"}]}',
        '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
        '{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}',
        '{"type": "fixed", "name": "F"}',
        '{"type": "fixed", "name": "F", "size": -1}',
        '{"type": "record", "name": "X"}',
        '{"type": "record", "name": "int", "fields": []}',
        '{"type": "array"}',
        '["int", "int"]',
        '["int", ["string"]]',
    ],
)
def test_invalid_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        avro_text(text)


def test_invalid_logical_types_are_kept_as_props_as_avro_java_does() -> None:
    # LogicalTypes.fromSchemaIgnoreInvalid: the schema is valid, the logical type is just a prop
    odd = avro({"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 5})
    assert odd.canonical() == '{"type":"bytes","logicalType":"decimal","precision":2,"scale":5}'
    assert avro({"type": "string", "logicalType": "no-such-type"}).canonical() == (
        '{"type":"string","logicalType":"no-such-type"}'
    )


def test_unknown_schema_type_is_invalid() -> None:
    with pytest.raises(InvalidSchema):
        parse_schema("THRIFT", '"int"')
