"""A Protobuf schema registered as a base64 FileDescriptorProto (confluent-kafka's ProtobufSerializer's form) is
the same schema as its .proto text: the same canonical form, so the same id."""

from __future__ import annotations

import base64

from google.protobuf import descriptor_pb2

from tidelog.schema_registry.protobuf_descriptor import descriptor_to_text, text_to_descriptor
from tidelog.schema_registry.schemas import parse_schema

T = descriptor_pb2.FieldDescriptorProto

TEXT = """
syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  repeated string tags = 2;
  map<string, int64> counts = 3;
  optional string note = 4;
  oneof payment {
    string card = 5;
    int64 voucher = 6;
  }
  Line first = 7;
  Status status = 8;
  message Line {
    string sku = 1;
  }
  reserved 10 to 12;
}
enum Status {
  NEW = 0;
  DONE = 1;
}
"""


def order_descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    order.field.add(name="tags", number=2, type=T.TYPE_STRING, label=T.LABEL_REPEATED)
    order.field.add(name="counts", number=3, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED,
                    type_name=".shop.Order.CountsEntry")
    order.field.add(name="note", number=4, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL, oneof_index=1,
                    proto3_optional=True)
    order.field.add(name="card", number=5, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL, oneof_index=0)
    order.field.add(name="voucher", number=6, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL, oneof_index=0)
    order.field.add(name="first", number=7, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL,
                    type_name=".shop.Order.Line")
    order.field.add(name="status", number=8, type=T.TYPE_ENUM, label=T.LABEL_OPTIONAL, type_name=".shop.Status")
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_note")
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    order.reserved_range.add(start=10, end=13)
    status = file.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="DONE", number=1)
    return file


def test_descriptor_and_text_are_the_same_schema() -> None:
    encoded = base64.standard_b64encode(order_descriptor().SerializeToString()).decode()
    text = descriptor_to_text(encoded)
    assert text is not None
    assert parse_schema("PROTOBUF", text, {}).canonical() == parse_schema("PROTOBUF", TEXT, {}).canonical()


def test_text_and_garbage_are_not_descriptors() -> None:
    assert descriptor_to_text(TEXT) is None
    assert descriptor_to_text("bm90IGEgZGVzY3JpcHRvcg==") is None  # base64, but of no descriptor
    assert descriptor_to_text("!!!") is None


def test_a_shadowed_name_stays_qualified() -> None:
    file = order_descriptor()
    inner = file.message_type[0].enum_type.add(name="Status")  # shop.Order.Status now hides shop.Status
    inner.value.add(name="X", number=0)
    text = descriptor_to_text(base64.standard_b64encode(file.SerializeToString()).decode())
    assert text is not None and "  shop.Status status = 8;" in text
    parse_schema("PROTOBUF", text, {})


def test_text_builds_back_into_the_descriptor() -> None:
    """?format=serialized: the stored text as a FileDescriptorProto, types resolved to full names as protoc does."""
    built = descriptor_pb2.FileDescriptorProto.FromString(base64.standard_b64decode(text_to_descriptor(TEXT, {})))
    expected = order_descriptor()
    expected.name = "default"
    assert built.message_type[0].field == expected.message_type[0].field
    assert [o.name for o in built.message_type[0].oneof_decl] == ["payment", "_note"]
    assert sorted(n.name for n in built.message_type[0].nested_type) == ["CountsEntry", "Line"]
    assert built.enum_type == expected.enum_type and built.package == "shop" and built.syntax == "proto3"
    # and back to the same text
    text = descriptor_to_text(text_to_descriptor(TEXT, {}))
    assert text is not None
    assert parse_schema("PROTOBUF", text, {}).canonical() == parse_schema("PROTOBUF", TEXT, {}).canonical()


def test_imported_types_resolve_through_the_references() -> None:
    common = 'syntax = "proto3";\npackage common;\nmessage Money {\n  int64 cents = 1;\n}\n'
    text = 'syntax = "proto3";\npackage shop;\nimport "common.proto";\nmessage Price {\n  common.Money amount = 1;\n}\n'
    built = descriptor_pb2.FileDescriptorProto.FromString(
        base64.standard_b64decode(text_to_descriptor(text, {"common.proto": common})))
    assert list(built.dependency) == ["common.proto"]
    assert built.message_type[0].field[0].type_name == ".common.Money"
