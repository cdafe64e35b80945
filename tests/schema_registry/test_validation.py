"""Broker-side Schema ID Validation (Confluent Server's `confluent.value.schema.validation` /
`confluent.key.schema.validation`) against a real broker with its registry on: records serialized by Confluent's
AvroSerializer pass; plain bytes, an unknown id or an id of another subject are refused with INVALID_RECORD, seen
by confluent-kafka and kafka-python producers, and nothing of a refused batch is stored; null keys and values
(tombstones) pass; the subject name strategies (topic, record, topic-record) pick the subject; DescribeConfigs
shows the configs; with the registry off a topic cannot turn them on."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import (
    Schema,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError
from kafka.errors import KafkaError as KafkaPythonError

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.protocol.records import Record, build_batch
from tidelog.testing import BrokerHandle, KafkaWire, run_broker

USER = {"type": "record", "name": "User", "namespace": "validation",
        "fields": [{"name": "name", "type": "string"}]}
KEY = {"type": "record", "name": "Key", "namespace": "validation", "fields": [{"name": "id", "type": "long"}]}
VALUE_ON = {"confluent.value.schema.validation": "true"}
KEY_ON = {"confluent.key.schema.validation": "true"}
STRATEGIES = "io.confluent.kafka.serializers.subject."


@pytest.fixture
def client(registry_broker: BrokerHandle) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_broker.schema_registry_url})


def new_topic(broker: BrokerHandle, configs: dict[str, str]) -> str:
    """A topic of its own created through the admin API (so the config goes through CreateTopics)."""
    topic = f"sr-validate-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(60)
    return topic


def wire(schema_id: int, body: bytes = b"\x06ada") -> bytes:
    """Confluent's wire format: magic byte 0, the big-endian schema id, then the serialized data."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def produce_all(broker: BrokerHandle, topic: str, records: list[tuple[bytes | None, bytes | None]],
                batched: bool = False, compression: str = "none", retries: int = 0) -> list[KafkaError | None]:
    """Produce with confluent-kafka (librdkafka); each record's delivery error (None: stored). Each record is
    flushed on its own (its own batch) unless `batched` (one lingering batch)."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 500 if batched else 0,
                         "compression.type": compression,
                         "enable.idempotence": False, "retries": retries})
    outcome: list[KafkaError | None] = [None] * len(records)
    delivered = [False] * len(records)

    def report(index: int) -> Any:
        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            outcome[index], delivered[index] = err, True
        return on_delivery

    for i, (key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, on_delivery=report(i))
        if not batched:
            assert producer.flush(60) == 0
    assert producer.flush(60) == 0
    assert all(delivered)
    return outcome


def high_watermark(broker: BrokerHandle, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"hw-{uuid.uuid4().hex[:6]}"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        consumer.close()


def turn_on(topic: str, name: str) -> ConfigResource:
    return ConfigResource(ConfigResource.Type.TOPIC, topic,
                          incremental_configs=[ConfigEntry(name, "true", incremental_operation=AlterConfigOpType.SET)])


def refused(error: KafkaError | None) -> bool:
    return error is not None and error.code() == KafkaError.INVALID_RECORD


def test_avro_serializer_accepted_plain_bytes_refused(registry_broker: BrokerHandle,
                                                      client: SchemaRegistryClient) -> None:
    topic = new_topic(registry_broker, VALUE_ON)
    serializer = AvroSerializer(client, json.dumps(USER))
    good = serializer({"name": "ada"}, SerializationContext(topic, MessageField.VALUE))
    assert good is not None
    assert produce_all(registry_broker, topic, [(None, good)]) == [None]
    [error] = produce_all(registry_broker, topic, [(None, b"plain bytes")])
    assert refused(error), error
    assert high_watermark(registry_broker, topic) == 1
    stored = registry_broker.records(topic)
    assert [r.value for r in stored] == [good]


def test_unknown_id_and_other_subjects_id_refused(registry_broker: BrokerHandle,
                                                  client: SchemaRegistryClient) -> None:
    topic = new_topic(registry_broker, VALUE_ON)
    own = client.register_schema(f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
    other = client.register_schema(f"{topic}-other-value",
                                   Schema(json.dumps({**USER, "name": "Other"}), "AVRO"))
    outcome = produce_all(registry_broker, topic, [(None, wire(own)), (None, wire(other)), (None, wire(999_999)),
                                                   (None, b"\x01" + own.to_bytes(4, "big")), (None, b"\x00\x00")])
    assert outcome[0] is None
    assert all(refused(e) for e in outcome[1:]), outcome
    assert high_watermark(registry_broker, topic) == 1


def test_soft_deleted_version_no_longer_validates(registry_broker: BrokerHandle,
                                                  client: SchemaRegistryClient) -> None:
    topic = new_topic(registry_broker, VALUE_ON)
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
    assert produce_all(registry_broker, topic, [(None, wire(schema_id))]) == [None]
    client.delete_subject(f"{topic}-value")
    [error] = produce_all(registry_broker, topic, [(None, wire(schema_id))])
    assert refused(error), error


def test_mixed_batch_refused_whole_with_record_errors(registry_broker: BrokerHandle,
                                                      client: SchemaRegistryClient) -> None:
    topic = new_topic(registry_broker, VALUE_ON)
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
    values = [wire(schema_id), b"not avro", wire(schema_id), wire(schema_id + 1000)]
    batch = bytes(build_batch([Record(i, 1_700_000_000_000 + i, None, v) for i, v in enumerate(values)], 0))
    cls = request_class(0)[9]
    T = cls.TopicProduceData
    request = cls(transactional_id=None, acks=-1, timeout_ms=30_000,
                  topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=0, records=batch)])])
    with KafkaWire(registry_broker.bootstrap) as kafka:
        [topic_response] = kafka.request(0, 9, request).responses
    [p] = topic_response.partition_responses
    assert p.error_code == ErrorCode.INVALID_RECORD and p.base_offset == -1
    assert [e.batch_index for e in p.record_errors] == [1, 3]
    assert "wire format" in p.record_errors[0].batch_index_error_message
    assert f"schema id {schema_id + 1000} is not registered" in p.record_errors[1].batch_index_error_message
    assert high_watermark(registry_broker, topic) == 0
    # the same mix through librdkafka in one lingering batch: the record errors reach the client, which fails the
    # bad records with INVALID_RECORD and the good ones as victims of the same batch; nothing is stored
    outcome = produce_all(registry_broker, topic, [(None, v) for v in values], batched=True)
    assert [refused(e) for e in outcome] == [False, True, False, True], outcome
    assert all(e is not None and e.code() == KafkaError._INVALID_DIFFERENT_RECORD for e in outcome[::2]), outcome
    assert high_watermark(registry_broker, topic) == 0
    assert produce_all(registry_broker, topic, [(None, values[0])]) == [None]
    assert high_watermark(registry_broker, topic) == 1


@pytest.mark.parametrize("compression", ["gzip", "lz4", "zstd"])
def test_compressed_batches_checked(registry_broker: BrokerHandle, client: SchemaRegistryClient,
                                    compression: str) -> None:
    topic = new_topic(registry_broker, VALUE_ON)
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
    good = [(None, wire(schema_id, b"\x06ada" * 50)) for _ in range(20)]
    outcome = produce_all(registry_broker, topic, [*good, (None, b"plain" * 50)], batched=True,
                          compression=compression)
    assert refused(outcome[-1]) and all(e is not None for e in outcome), outcome
    assert high_watermark(registry_broker, topic) == 0
    assert produce_all(registry_broker, topic, good, batched=True, compression=compression) == [None] * 20
    assert high_watermark(registry_broker, topic) == 20


def test_kafka_python_producer(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = new_topic(registry_broker, VALUE_ON)
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
    producer = KafkaProducer(bootstrap_servers=registry_broker.bootstrap, acks="all", retries=0,
                             request_timeout_ms=30_000, linger_ms=200)
    try:
        metadata = producer.send(topic, wire(schema_id)).get(timeout=60)
        assert metadata.offset == 0
        with pytest.raises(InvalidRecordError):
            producer.send(topic, b"plain bytes").get(timeout=60)
        # one batch mixing a good and a bad record: both fail (the good one as part of the refused batch, as
        # kafka-python reads the record errors), neither is stored
        good, bad = producer.send(topic, wire(schema_id)), producer.send(topic, b"bad")
        producer.flush(60)
        with pytest.raises(InvalidRecordError):
            bad.get(timeout=60)
        with pytest.raises(KafkaPythonError, match="part of a batch which had one more more invalid records"):
            good.get(timeout=60)
    finally:
        producer.close(30)
    assert high_watermark(registry_broker, topic) == 1


def test_key_validation_and_null_keys(registry_broker: BrokerHandle, client: SchemaRegistryClient) -> None:
    topic = new_topic(registry_broker, KEY_ON)
    key_id = client.register_schema(f"{topic}-key", Schema(json.dumps(KEY), "AVRO"))
    value_id = client.register_schema(f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
    outcome = produce_all(registry_broker, topic, [
        (wire(key_id, b"\x02"), b"any value"),  # the value is not checked: only key validation is on
        (None, b"any value"),  # a null key passes
        (b"plain key", wire(value_id)),
        (wire(value_id, b"\x02"), b"v"),  # an id of <topic>-value is not one of <topic>-key
    ])
    assert outcome[:2] == [None, None]
    assert refused(outcome[2]) and refused(outcome[3]), outcome
    assert high_watermark(registry_broker, topic) == 2


def test_tombstones_pass(registry_broker: BrokerHandle) -> None:
    topic = new_topic(registry_broker, {**VALUE_ON, "cleanup.policy": "compact"})
    assert produce_all(registry_broker, topic, [(b"k1", None), (b"k2", None)]) == [None, None]
    assert high_watermark(registry_broker, topic) == 2


def test_validation_off_by_default_and_described(registry_broker: BrokerHandle) -> None:
    plain = new_topic(registry_broker, {})
    assert produce_all(registry_broker, plain, [(b"k", b"plain bytes")]) == [None]
    validated = new_topic(registry_broker, VALUE_ON)
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    names = ("confluent.key.schema.validation", "confluent.value.schema.validation",
             "confluent.key.subject.name.strategy")
    default = STRATEGIES + "TopicNameStrategy"
    for topic, expected in ((plain, ("false", "false", default)), (validated, ("false", "true", default))):
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entries = admin.describe_configs([resource])[resource].result(60)
        assert tuple(entries[n].value for n in names) == expected
    # turned on for the plain topic by IncrementalAlterConfigs: its next plain record is refused
    resource = turn_on(plain, "confluent.value.schema.validation")
    admin.incremental_alter_configs([resource])[resource].result(60)
    [error] = produce_all(registry_broker, plain, [(b"k", b"plain bytes")])
    assert refused(error), error
    assert high_watermark(registry_broker, plain) == 1


@pytest.mark.parametrize(("strategy", "serializer_strategy"), [
    ("RecordNameStrategy", record_subject_name_strategy),
    ("TopicRecordNameStrategy", topic_record_subject_name_strategy),
])
def test_record_name_strategies(registry_broker: BrokerHandle, client: SchemaRegistryClient, strategy: str,
                                serializer_strategy: Any) -> None:
    topic = new_topic(registry_broker, {**VALUE_ON, "confluent.value.subject.name.strategy": STRATEGIES + strategy})
    prefix = "" if strategy == "RecordNameStrategy" else f"{topic}-"
    user = {**USER, "namespace": f"ns{uuid.uuid4().hex[:8]}"}  # RecordNameStrategy's subjects span topics
    serializer = AvroSerializer(client, json.dumps(user), conf={"subject.name.strategy": serializer_strategy})
    good = serializer({"name": "ada"}, SerializationContext(topic, MessageField.VALUE))
    assert good is not None
    assert client.get_latest_version(f"{prefix}{user['namespace']}.User").schema_id == int.from_bytes(good[1:5],
                                                                                                      "big")
    # an id of <topic>-value (TopicNameStrategy's subject) is not one of the record's subject
    other = client.register_schema(f"{topic}-value", Schema(json.dumps({**user, "name": "Other"}), "AVRO"))
    # JSON Schema by its title, Protobuf by its package and first message
    json_id = client.register_schema(f"{prefix}Person", Schema(json.dumps({"title": "Person", "type": "object"}),
                                                                "JSON"))
    proto = 'syntax = "proto3";\n// message Decoy {}\npackage shop.v1;\nmessage Order { string id = 1; }\n'
    proto_id = client.register_schema(f"{prefix}shop.v1.Order", Schema(proto, "PROTOBUF"))
    outcome = produce_all(registry_broker, topic, [(None, good), (None, wire(other)), (None, wire(json_id)),
                                                   (None, wire(proto_id))])
    assert [e is None for e in outcome] == [True, False, True, True], outcome
    assert refused(outcome[1])


def test_unknown_strategy_refused(registry_broker: BrokerHandle) -> None:
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    topic = f"sr-validate-{uuid.uuid4().hex[:10]}"
    with pytest.raises(Exception) as raised:
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "confluent.value.subject.name.strategy": "com.example.MyStrategy"})])[topic].result(60)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_registry_off_refuses_the_config(tidelog_session_broker: BrokerHandle) -> None:
    """Confluent Server needs confluent.schema.registry.url for validation; here the registry is the broker's own,
    so with it off (schema.registry.port -1) creating or altering a topic to validate answers INVALID_CONFIG."""
    admin = AdminClient({"bootstrap.servers": tidelog_session_broker.bootstrap})
    topic = f"sr-validate-off-{uuid.uuid4().hex[:8]}"
    for configs in (VALUE_ON, KEY_ON):
        with pytest.raises(Exception) as raised:
            admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(60)
        assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    admin.create_topics([NewTopic(topic, 1, 1, config={"confluent.value.schema.validation": "false"})])[
        topic].result(60)
    resource = turn_on(topic, "confluent.value.schema.validation")
    with pytest.raises(Exception) as raised:
        admin.incremental_alter_configs([resource])[resource].result(60)
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_validation_survives_restarts(tmp_path: Path) -> None:
    """The ids come back with the registry's replay after a restart (a produce during the replay is answered
    with a retriable error, which the producer retries); restarted with the registry off, the topic keeps its
    config and refuses every non-null record (it cannot check them)."""
    with run_broker(log_dir=tmp_path, overrides={"schema.registry.port": 0}) as broker:
        topic = new_topic(broker, VALUE_ON)
        schema_id = SchemaRegistryClient({"url": broker.schema_registry_url}).register_schema(
            f"{topic}-value", Schema(json.dumps(USER), "AVRO"))
        assert produce_all(broker, topic, [(None, wire(schema_id))]) == [None]
    with run_broker(log_dir=tmp_path, overrides={"schema.registry.port": 0}) as broker:
        # produced at once, while the registry may still be replaying: NOT_ENOUGH_REPLICAS until it is up
        assert produce_all(broker, topic, [(None, wire(schema_id))], retries=1000) == [None]
        assert broker.schema_registry_url  # the registry is up: the refusal below is a check, not a wait
        assert refused(produce_all(broker, topic, [(None, b"plain")])[0])
        assert high_watermark(broker, topic) == 2
    with run_broker(log_dir=tmp_path) as broker:
        outcome = produce_all(broker, topic, [(None, wire(schema_id)), (None, None)])
        assert refused(outcome[0]), outcome
        assert outcome[1] is None  # a tombstone needs no check
        assert high_watermark(broker, topic) == 3
