"""PROTOBUF schemas as FileDescriptorProtos: confluent-kafka's Python client registers a schema as a base64
serialized FileDescriptorProto and asks for `format=serialized`. The descriptors we build are checked by the real
protobuf runtime: they load into a descriptor pool and the message classes made from them carry data."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)

from tidelog.schema_registry.schemas import InvalidSchema, check_compatibility, parse_schema

SCHEMA = '''syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
option java_package = "com.acme";
message User {
  string name = 1;
  int32 age = 2 [deprecated = true];
  repeated Address addresses = 3;
  map<string, int64> counts = 4;
  oneof contact { string email = 5; string phone = 6; }
  optional int32 score = 7;
  Kind kind = 8;
  google.protobuf.Timestamp at = 9;
  enum Kind { UNKNOWN = 0; ADMIN = 1; }
  message Address { string street = 1; }
}
enum Top { A = 0; B = 1; }
'''


def _pool_with(fdp: descriptor_pb2.FileDescriptorProto) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return pool


def test_serialized_descriptor_makes_working_message_classes() -> None:
    schema = parse_schema("PROTOBUF", SCHEMA)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.serialized("acme/user.proto")))  # type: ignore[attr-defined]
    assert fdp.name == "acme/user.proto" and fdp.package == "acme" and fdp.syntax == "proto3"
    assert list(fdp.dependency) == ["google/protobuf/timestamp.proto"]
    assert fdp.options.java_package == "com.acme"
    user_type = message_factory.GetMessageClass(_pool_with(fdp).FindMessageTypeByName("acme.User"))
    user = user_type(name="ann", age=3, counts={"a": 1}, email="a@b", score=0, kind=1)
    user.addresses.add(street="main")
    user.at.seconds = 1700000000
    back = user_type.FromString(user.SerializeToString())
    assert (back.name, back.counts["a"], back.email, back.kind, back.addresses[0].street) == ("ann", 1, "a@b", 1,
                                                                                             "main")
    assert back.HasField("score") and back.WhichOneof("contact") == "email" and back.at.seconds == 1700000000
    fields = {f.name: f for f in fdp.message_type[0].field}
    assert fields["age"].options.deprecated
    assert fields["counts"].type_name == ".acme.User.CountsEntry"
    assert fields["at"].type_name == ".google.protobuf.Timestamp"
    assert fields["kind"].type == descriptor_pb2.FieldDescriptorProto.TYPE_ENUM
    assert fields["score"].proto3_optional


def test_a_base64_descriptor_registers_as_its_proto_text() -> None:
    text_form = parse_schema("PROTOBUF", SCHEMA)
    b64 = text_form.serialized("acme/user.proto")  # type: ignore[attr-defined]
    from_descriptor = parse_schema("PROTOBUF", b64)
    canonical = from_descriptor.canonical()
    assert canonical.startswith('syntax = "proto3";\npackage acme;\n\nimport "google/protobuf/timestamp.proto";\n')
    assert "  map<string, int64> counts = 4;\n" in canonical
    assert "  optional int32 score = 7;\n" in canonical
    assert "  oneof contact {\n    string email = 5;\n    string phone = 6;\n  }\n" in canonical
    assert "  .acme.User.Kind kind = 8;\n" in canonical  # a descriptor names types in full, as Confluent prints them
    assert parse_schema("PROTOBUF", canonical).canonical() == canonical
    assert check_compatibility("FULL", from_descriptor, [text_form]) == []
    assert from_descriptor.normalized() == text_form.normalized()


@pytest.mark.parametrize("module", [timestamp_pb2, struct_pb2, any_pb2, wrappers_pb2, descriptor_pb2],
                         ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_generated_descriptors_parse_and_serve_back(module: object) -> None:
    descriptor = module.DESCRIPTOR  # type: ignore[attr-defined]
    schema = parse_schema("PROTOBUF", base64.b64encode(descriptor.serialized_pb).decode())
    again = parse_schema("PROTOBUF", schema.canonical())  # what the registry stored, read back
    assert again.canonical() == schema.canonical()
    served = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(again.serialized(descriptor.name)))  # type: ignore[attr-defined]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(served)
    original = descriptor_pb2.FileDescriptorProto.FromString(descriptor.serialized_pb)
    for message in original.message_type:
        found = pool.FindMessageTypeByName(f"{original.package}.{message.name}")
        assert sorted((f.name, f.number, f.type) for f in found.fields) == sorted(
            (f.name, f.number, f.type) for f in message.field)


@pytest.mark.parametrize("text", ["abc", "AAAA", "bm90IGEgZGVzY3JpcHRvcg=="])
def test_base64_that_is_no_descriptor_is_invalid(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse_schema("PROTOBUF", text)
