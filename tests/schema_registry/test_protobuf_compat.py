"""PROTOBUF in the schema library: parsing, Confluent's printed canonical form and its compatibility rules.

Each row is (old .proto, new .proto, the directions in which new is compatible with old) per Confluent's
protobuf SchemaDiff: what matters is the wire format, so field numbers identify fields, names may change, fields
may come and go (unless required or in a oneof), and a field's type may change only within its wire-compatible
group.
"""

from __future__ import annotations

import pytest

from tidelog.schema_registry.schemas import (
    COMPATIBILITY_LEVELS,
    InvalidSchema,
    ParsedSchema,
    check_compatibility,
    parse_schema,
)


def proto(body: str, syntax: str = "proto3", package: str = "acme", references: dict[str, str] | None = None) -> ParsedSchema:
    header = (f'syntax = "{syntax}";\n' if syntax else "") + (f"package {package};\n" if package else "")
    return parse_schema("PROTOBUF", header + body, references or {})


def msg(fields: str, name: str = "User") -> str:
    return f"message {name} {{ {fields} }}\n"


B, F = "BACKWARD", "FORWARD"
BOTH = {B, F}
NEITHER: set[str] = set()
ADDR = msg("string street = 1;", "Address")

PAIRS: list[tuple[str, str, str, set[str]]] = [
    ("identical", msg("string name = 1;"), msg("string name = 1;"), BOTH),
    ("field added", msg("string name = 1;"), msg("string name = 1; int32 age = 2;"), BOTH),
    ("field removed", msg("string name = 1; int32 age = 2;"), msg("string name = 1;"), BOTH),
    ("field renamed", msg("string name = 1;"), msg("string full_name = 1;"), BOTH),
    ("field renumbered (a removal and an addition)", msg("string name = 1;"), msg("string name = 2;"), BOTH),
    ("int32 to int64", msg("int32 n = 1;"), msg("int64 n = 1;"), BOTH),
    ("uint64 to bool", msg("uint64 n = 1;"), msg("bool n = 1;"), BOTH),
    ("int32 to sint32", msg("int32 n = 1;"), msg("sint32 n = 1;"), NEITHER),
    ("int32 to string", msg("int32 n = 1;"), msg("string n = 1;"), NEITHER),
    ("string to bytes", msg("string s = 1;"), msg("bytes s = 1;"), BOTH),
    ("fixed32 to sfixed32", msg("fixed32 n = 1;"), msg("sfixed32 n = 1;"), BOTH),
    ("fixed32 to fixed64", msg("fixed32 n = 1;"), msg("fixed64 n = 1;"), NEITHER),
    ("float to double", msg("float n = 1;"), msg("double n = 1;"), NEITHER),
    ("enum to int32", "enum Kind { A = 0; }\n" + msg("Kind k = 1;"), "enum Kind { A = 0; }\n" + msg("int32 k = 1;"), BOTH),
    ("scalar to message", ADDR + msg("string a = 1;"), ADDR + msg("Address a = 1;"), NEITHER),
    ("scalar to map", msg("string a = 1;"), msg("map<string, string> a = 1;"), NEITHER),
    ("map value type changed", msg("map<string, int64> m = 1;"), msg("map<string, string> m = 1;"), NEITHER),
    ("message field's type renamed", ADDR + msg("Address a = 1;") + msg("string s = 1;", "Other"),
     ADDR + msg("Other a = 1;") + msg("string s = 1;", "Other"), NEITHER),
    ("message field's type changes incompatibly", msg("int32 n = 1;", "Address") + msg("Address a = 1;"),
     msg("string n = 1;", "Address") + msg("Address a = 1;"), NEITHER),
    ("message field's type gains a field", ADDR + msg("Address a = 1;"),
     msg("string street = 1; string city = 2;", "Address") + msg("Address a = 1;"), BOTH),
    ("numeric label changed", msg("optional int32 n = 1;"), msg("repeated int32 n = 1;"), NEITHER),
    ("string label changed", msg("optional string s = 1;"), msg("repeated string s = 1;"), BOTH),
    ("message added", msg("string name = 1;"), msg("string name = 1;") + msg("int32 x = 1;", "Extra"), {B}),
    ("message removed", msg("string name = 1;") + msg("int32 x = 1;", "Extra"), msg("string name = 1;"), {F}),
    ("messages reordered", msg("int32 x = 1;", "A") + msg("int32 y = 1;", "B"),
     msg("int32 y = 1;", "B") + msg("int32 x = 1;", "A"), BOTH),
    ("nested message removed", msg("message Inner { int32 x = 1; } int32 y = 2;"), msg("int32 y = 2;"), {F}),
    ("oneof field removed", msg("oneof c { string email = 1; string phone = 2; }"),
     msg("oneof c { string email = 1; }"), {F}),
    ("oneof added around a new field", msg("string name = 1;"), msg("string name = 1; oneof c { string email = 2; }"), BOTH),
    ("field moved into an existing oneof", msg("oneof c { string email = 1; } string phone = 2;"),
     msg("oneof c { string email = 1; string phone = 2; }"), {F}),
    ("enum constant added", "enum Kind { A = 0; }\n", "enum Kind { A = 0; B = 1; }\n", BOTH),
    ("enum constant removed", "enum Kind { A = 0; B = 1; }\n", "enum Kind { A = 0; }\n", BOTH),
]

PROTO2_PAIRS: list[tuple[str, str, str, set[str]]] = [
    ("required field added", msg("optional string name = 1;"),
     msg("optional string name = 1; required int32 id = 2;"), NEITHER),
    ("optional field added", msg("optional string name = 1;"),
     msg("optional string name = 1; optional int32 id = 2;"), BOTH),
]


def expected_compatible(level: str, directions: set[str]) -> bool:
    if level == "NONE":
        return True
    need = {B} if level.startswith(B) else {F} if level.startswith(F) else {B, F}
    return need <= directions


@pytest.mark.parametrize("case,old,new,directions", PAIRS, ids=[p[0] for p in PAIRS])
def test_pair_verdict_per_level(case: str, old: str, new: str, directions: set[str]) -> None:
    old_s, new_s = proto(old), proto(new)
    for level in COMPATIBILITY_LEVELS:
        reasons = check_compatibility(level, new_s, [old_s])
        assert (not reasons) == expected_compatible(level, directions), (case, level, reasons)


@pytest.mark.parametrize("case,old,new,directions", PROTO2_PAIRS, ids=[p[0] for p in PROTO2_PAIRS])
def test_proto2_pair_verdict_per_level(case: str, old: str, new: str, directions: set[str]) -> None:
    old_s, new_s = proto(old, syntax="proto2"), proto(new, syntax="proto2")
    for level in COMPATIBILITY_LEVELS:
        reasons = check_compatibility(level, new_s, [old_s])
        assert (not reasons) == expected_compatible(level, directions), (case, level, reasons)


def test_package_change_is_incompatible() -> None:
    old, new = proto(msg("string a = 1;")), proto(msg("string a = 1;"), package="other")
    reasons = check_compatibility("BACKWARD", new, [old])
    assert reasons[0] == (
        '{errorType:"PACKAGE_CHANGED", description:"The package at \'#/\' in the new schema does not match the '
        'package in the old schema"}'
    )


def test_messages_are_confluents_verbose_wording() -> None:
    old = proto(msg("int32 n = 1; oneof c { string e = 2; string p = 3; }"))
    new = proto(msg("string n = 1; oneof c { string e = 2; }"))
    assert check_compatibility("BACKWARD", new, [old], versions=[4]) == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path \'#/User/1\' in the '
        'new schema does not match its kind in the old schema"}',
        '{errorType:"ONEOF_FIELD_REMOVED", description:"The new schema is missing a oneof field at path '
        '\'#/User/c/3\' in the old schema"}',
        "{oldSchemaVersion: 4}",
        f"{{oldSchema: '{old.canonical()}'}}",
    ]
    removed = check_compatibility("BACKWARD", proto(msg("int32 n = 1;")), [proto(msg("int32 n = 1;") + msg("", "X"))])
    assert removed[0] == (
        '{errorType:"MESSAGE_REMOVED", description:"The new schema is missing a MESSAGE type at path \'#/X\' in the '
        'old schema"}'
    )


def test_transitive_levels_check_every_previous_version() -> None:
    v1 = proto(msg("int32 n = 1;"))
    v2 = proto(msg("int32 n = 1; string s = 2;"))
    v3 = proto(msg("string n = 1; string s = 2;"))  # n's kind changed from v1 and v2
    v4 = proto(msg("int64 n = 1; string s = 2;"))
    assert check_compatibility("BACKWARD", v4, [v1, v2, v3])
    v3ok = proto(msg("int32 n = 1;"))
    assert check_compatibility("BACKWARD_TRANSITIVE", v4, [v1, v2, v3ok]) == []
    assert check_compatibility("BACKWARD", v4, [v3, v3ok]) == []
    assert check_compatibility("BACKWARD_TRANSITIVE", v4, [v3, v3ok])


def test_references_resolve_types_in_other_files() -> None:
    common_v1 = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
    common_v2 = 'syntax = "proto3";\npackage common;\nmessage Money { string units = 1; }\n'
    body = 'import "common/money.proto";\n' + msg("common.Money price = 1;", "Order")
    v1 = proto(body, references={"common/money.proto": common_v1})
    v2 = proto(body, references={"common/money.proto": common_v2})
    assert v1.canonical() == v2.canonical()
    reasons = check_compatibility("BACKWARD", v2, [v1])
    # the referenced message's own change is reported at its path, then the field that uses it
    assert [r.split("'")[1] for r in reasons if r.startswith("{errorType")] == ["#/Money/1", "#/Order/1"]
    assert [r.split('"')[1] for r in reasons if r.startswith("{errorType")] == [
        "FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"
    ]
    with pytest.raises(InvalidSchema):
        proto(body)  # the import is not among the references


def test_canonical_form_is_confluents_layout() -> None:
    text = (
        'syntax = "proto3";\n// users\npackage acme;\nimport "google/protobuf/timestamp.proto";\n'
        'option java_package = "com.acme";\n'
        "message User {\n  oneof contact { string email = 5; }\n  string name = 1;   // the name\n"
        "  int32 age = 2 [deprecated = true];\n  map<string,int64> m = 4;\n  google.protobuf.Timestamp at = 6;\n"
        "  enum Kind { K0 = 0; }\n  message Inner { int32 x = 1; }\n  reserved 9, 10 to 12;\n}\n"
        "enum Top { A = 0; }\n"
    )
    assert parse_schema("PROTOBUF", text).canonical() == (
        'syntax = "proto3";\npackage acme;\n\nimport "google/protobuf/timestamp.proto";\n\n'
        'option java_package = "com.acme";\n\n'
        "message User {\n  reserved 9, 10 to 12;\n\n  string name = 1;\n  int32 age = 2 [deprecated = true];\n"
        "  map<string, int64> m = 4;\n  google.protobuf.Timestamp at = 6;\n\n  oneof contact {\n    string email = 5;\n"
        "  }\n\n  message Inner {\n    int32 x = 1;\n  }\n  enum Kind {\n    K0 = 0;\n  }\n}\nenum Top {\n  A = 0;\n}\n"
    )


def test_identical_schemas_canonicalise_equal_and_normalized_orders_fields() -> None:
    a = proto("message User {\n  string name = 1;\n  int32 age = 2;\n}\n")
    b = proto("// same\nmessage   User{string name=1;int32 age=2;}")
    assert a.canonical() == b.canonical()
    reordered = proto(msg("int32 age = 2; string name = 1;"))
    assert reordered.canonical() != a.canonical()
    assert reordered.normalized() == a.normalized()
    nested = proto(msg("message Inner { int32 x = 1; } Inner i = 1;"))
    assert "  .acme.User.Inner i = 1;\n" in nested.normalized()
    # a well-known type is not modelled, but written in full as Confluent does
    stamped = proto('import "google/protobuf/timestamp.proto";\n' + msg("google.protobuf.Timestamp at = 1;"))
    assert "  .google.protobuf.Timestamp at = 1;\n" in stamped.normalized()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "message { }",
        'syntax = "proto3"; message A { string a = ; }',
        'syntax = "proto3"; message A { B b = 1; }',
        'syntax = "proto3"; message A { string a = 1; int32 b = 1; }',
        'syntax = "proto3"; message A { string a = 1; int32 a = 2; }',
        'syntax = "proto3"; message A { string a = 0; }',
        'syntax = "proto3"; message A { string a = 19000; }',
        'syntax = "proto3"; import "missing.proto"; message A { string a = 1; }',
        'syntax = "proto4"; message A { string a = 1; }',
        'edition = "2023"; message A { string a = 1; }',
    ],
)
def test_invalid_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse_schema("PROTOBUF", text)
