"""confluent-kafka's own Schema Registry client and serializers against tidelog's registry: records produced with
the Avro, JSON Schema and Protobuf serializers to a tidelog topic and consumed back with the deserializer (auto-registration,
use.latest.version, schema references), and the client's registry calls (configs, deletes, compatibility)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tidelog.testing import BrokerHandle

USER = {"type": "record", "name": "User", "namespace": "clients",
        "fields": [{"name": "name", "type": "string"}, {"name": "favorite", "type": ["null", "long"],
                                                        "default": None}]}


@pytest.fixture
def client(registry_broker: BrokerHandle) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_broker.schema_registry_url})


def topic_name() -> str:
    return f"sr-clients-{uuid.uuid4().hex[:10]}"


def produce(broker: BrokerHandle, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(60) == 0


def consume(broker: BrokerHandle, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is None:
                if len(out) >= count:
                    break
                continue
            assert message.error() is None, message.error()
            out.append(message.value())
    finally:
        consumer.close()
    return out


def test_avro_round_trip_with_auto_registration(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = topic_name()
    registry_broker.create_topic(topic)
    serializer = AvroSerializer(client, json.dumps(USER))
    users = [{"name": "ada", "favorite": 7}, {"name": "grace", "favorite": None}]
    ctx = SerializationContext(topic, MessageField.VALUE)
    payloads = [serializer(u, ctx) for u in users]
    assert all(p is not None and p[0] == 0 for p in payloads)  # the magic byte, then the 4-byte schema id
    produce(registry_broker, topic, [p for p in payloads if p is not None])

    registered = client.get_latest_version(f"{topic}-value")
    assert registered.version == 1
    assert {int.from_bytes(p[1:5], "big") for p in payloads if p is not None} == {registered.schema_id}

    fresh = SchemaRegistryClient({"url": registry_broker.schema_registry_url})  # nothing cached: asks by id
    deserializer = AvroDeserializer(fresh)
    got = [deserializer(v, ctx) for v in consume(registry_broker, topic, len(users))]
    assert got == users


def test_use_latest_version_and_evolution(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = topic_name()
    registry_broker.create_topic(topic)
    subject = f"{topic}-value"
    v1 = client.register_schema(subject, Schema(json.dumps(USER), "AVRO"))
    evolved = dict(USER, fields=[*USER["fields"], {"name": "email", "type": "string", "default": ""}])  # type: ignore[list-item]
    assert client.test_compatibility(subject, Schema(json.dumps(evolved), "AVRO"))
    v2 = client.register_schema(subject, Schema(json.dumps(evolved), "AVRO"))
    assert v2 != v1
    assert client.get_versions(subject) == [1, 2]

    serializer = AvroSerializer(client, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    payload = serializer({"name": "linus", "favorite": None, "email": "l@k.org"}, ctx)
    assert payload is not None and int.from_bytes(payload[1:5], "big") == v2
    produce(registry_broker, topic, [payload])
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.schema_registry_url}))
    assert deserializer(consume(registry_broker, topic, 1)[0], ctx) == {"name": "linus", "favorite": None,
                                                                        "email": "l@k.org"}

    incompatible = dict(USER, fields=[{"name": "name", "type": "int"}])
    assert not client.test_compatibility(subject, Schema(json.dumps(incompatible), "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(incompatible), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 40901
    assert client.get_versions(subject) == [1, 2]


def test_schema_references(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = topic_name()
    registry_broker.create_topic(topic)
    address = {"type": "record", "name": "Address", "namespace": "clients",
               "fields": [{"name": "city", "type": "string"}]}
    client.register_schema(f"{topic}-address", Schema(json.dumps(address), "AVRO"))
    customer = {"type": "record", "name": "Customer", "namespace": "clients",
                "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "clients.Address"}]}
    refs = [SchemaReference("clients.Address", f"{topic}-address", 1)]
    subject = f"{topic}-value"
    schema_id = client.register_schema(subject, Schema(json.dumps(customer), "AVRO", refs))
    latest = client.get_latest_version(subject)
    assert latest.schema_id == schema_id and [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("clients.Address", f"{topic}-address", 1)]

    serializer = AvroSerializer(client, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    value = {"name": "ada", "home": {"city": "London"}}
    payload = serializer(value, ctx)
    assert payload is not None
    produce(registry_broker, topic, [payload])
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.schema_registry_url}))
    assert deserializer(consume(registry_broker, topic, 1)[0], ctx) == value
    assert client.get_referenced_by(f"{topic}-address", 1) == [schema_id]


def test_client_admin_calls(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    subject = f"admin-{uuid.uuid4().hex[:8]}"
    schema_id = client.register_schema(subject, Schema(json.dumps(USER), "AVRO"))
    assert subject in client.get_subjects()
    assert client.lookup_schema(subject, Schema(json.dumps(USER), "AVRO")).schema_id == schema_id
    assert json.loads(client.get_schema(schema_id).schema_str) == json.loads(
        client.get_latest_version(subject).schema.schema_str)
    assert client.set_compatibility(subject, "FULL") == {"compatibility": "FULL"}
    assert client.get_compatibility(subject) == "FULL"
    assert "AVRO" in client.get_schema_types()
    assert client.get_version(subject, 1).schema_id == schema_id
    assert client.delete_version(subject, 1) == 1
    assert client.delete_subject(subject, permanent=True) == [1]
    fresh = SchemaRegistryClient({"url": registry_broker.schema_registry_url})  # the client caches latest
    with pytest.raises(SchemaRegistryError) as gone:
        fresh.get_latest_version(subject)
    assert gone.value.error_code == 40401
    assert subject not in fresh.get_subjects()


def test_json_schema_round_trip(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = topic_name()
    registry_broker.create_topic(topic)
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
              "required": ["id"]}
    serializer = JSONSerializer(json.dumps(schema), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [{"id": 1, "item": "tea"}, {"id": 2}]
    payloads = [serializer(o, ctx) for o in orders]
    produce(registry_broker, topic, [p for p in payloads if p is not None])
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON" and latest.version == 1
    assert {int.from_bytes(p[1:5], "big") for p in payloads if p is not None} == {latest.schema_id}
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry_broker.schema_registry_url}))
    assert [deserializer(v, ctx) for v in consume(registry_broker, topic, 2)] == orders
    # an added required property breaks BACKWARD compatibility (old data lacks it)
    stricter = dict(schema, required=["id", "item"])
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(f"{topic}-value", Schema(json.dumps(stricter), "JSON"))
    assert refused.value.error_code == 40901


def order_message_class() -> Any:
    """A Protobuf message class built from a descriptor at run time (as protoc's generated code would)."""
    file = descriptor_pb2.FileDescriptorProto(name=f"orders_{uuid.uuid4().hex[:6]}.proto", package="shop",
                                              syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    order.field.add(name="item", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    order.field.add(name="tags", number=3, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_round_trip(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = topic_name()
    registry_broker.create_topic(topic)
    order = order_message_class()
    serializer = ProtobufSerializer(order, client, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    sent = [order(id=1, item="tea", tags=["hot"]), order(id=2, item="cake")]
    payloads = [serializer(m, ctx) for m in sent]
    produce(registry_broker, topic, [p for p in payloads if p is not None])
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF" and "message Order" in latest.schema.schema_str
    assert {int.from_bytes(p[1:5], "big") for p in payloads if p is not None} == {latest.schema_id}
    deserializer = ProtobufDeserializer(order, {"use.deprecated.format": False})
    assert [deserializer(v, ctx) for v in consume(registry_broker, topic, 2)] == sent
    # the same descriptor registered again is the same schema
    assert ProtobufSerializer(order, client, {"use.deprecated.format": False})(sent[0], ctx) == payloads[0]


def test_protobuf_use_latest_version(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = topic_name()
    registry_broker.create_topic(topic)
    order = order_message_class()
    ctx = SerializationContext(topic, MessageField.VALUE)
    registered = ProtobufSerializer(order, client, {"use.deprecated.format": False})(order(id=1), ctx)
    assert registered is not None
    latest = ProtobufSerializer(order, client, {"use.deprecated.format": False, "auto.register.schemas": False,
                                                "use.latest.version": True})
    payload = latest(order(id=9, item="jam"), ctx)
    assert payload is not None and payload[1:5] == registered[1:5]


def test_schemas_topic_with_a_plain_consumer(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    """`_schemas` is an ordinary topic: any consumer reads Confluent's key/value JSON layout from it."""
    subject = f"plain-{uuid.uuid4().hex[:8]}"
    schema_id = client.register_schema(subject, Schema(json.dumps(USER), "AVRO"))
    consumer = Consumer({"bootstrap.servers": registry_broker.bootstrap, "group.id": f"g-{subject}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["_schemas"])
    found = None
    try:
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is None or message.error() is not None or subject.encode() not in (message.key() or b""):
                continue
            found = message
            break
    finally:
        consumer.close()
    assert found is not None
    assert json.loads(found.key()) == {"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}
    value = json.loads(found.value())
    assert (value["subject"], value["version"], value["id"], value["deleted"]) == (subject, 1, schema_id, False)
    assert json.loads(value["schema"]) == json.loads(client.get_schema(schema_id).schema_str)
