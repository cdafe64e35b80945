"""Option parsing of the `tidelog` data source: the connector's names, defaults and rejections."""

from __future__ import annotations

import pytest

from tidelog.pipeline.client import consumer_config, producer_config
from tidelog.pipeline.options import (
    EARLIEST,
    LATEST,
    OptionError,
    TopicPartition,
    offsets_from_json,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
)
from tidelog.pipeline.reading import OffsetRange, split_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_differ_between_batch_and_streaming() -> None:
    batch = parse_source_options({**BOOT, "subscribe": "a"}, streaming=False)
    stream = parse_source_options({**BOOT, "subscribe": "a"}, streaming=True)
    assert batch.starting.kind == "earliest"
    assert batch.ending is not None and batch.ending.kind == "latest"
    assert stream.starting.kind == "latest"
    assert stream.ending is None
    assert batch.fail_on_data_loss is True and batch.include_headers is False
    assert batch.poll_timeout_ms == 120_000 and batch.max_offsets_per_trigger is None


def test_option_names_are_case_insensitive() -> None:
    opts = parse_source_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "x, y", "INCLUDEHEADERS": "TRUE", "failOnDataLoss": "false",
         "maxOffsetsPerTrigger": "7"},
        streaming=True,
    )
    assert opts.subscription.kind == "subscribe" and opts.subscription.topics == ("x", "y")
    assert opts.include_headers is True and opts.fail_on_data_loss is False
    assert opts.max_offsets_per_trigger == 7
    assert opts.kafka_params == {"bootstrap.servers": "h:1"}


def test_exactly_one_subscription_strategy() -> None:
    with pytest.raises(OptionError, match="Only one of"):
        parse_source_options({**BOOT, "subscribe": "a", "subscribePattern": "a.*"}, streaming=False)
    with pytest.raises(OptionError, match="must be specified"):
        parse_source_options(BOOT, streaming=False)
    with pytest.raises(OptionError, match="bootstrap.servers"):
        parse_source_options({"subscribe": "a"}, streaming=False)


def test_assign_and_pattern() -> None:
    opts = parse_source_options({**BOOT, "assign": '{"t1":[1,0],"t2":[3]}'}, streaming=False)
    assert opts.subscription.assigned == (TopicPartition("t1", 0), TopicPartition("t1", 1), TopicPartition("t2", 3))
    with pytest.raises(OptionError):
        parse_source_options({**BOOT, "assign": '["t1"]'}, streaming=False)
    pat = parse_source_options({**BOOT, "subscribePattern": "orders-.*"}, streaming=False).subscription
    # Java's matches() is a whole-string match.
    assert pat.matches("orders-eu") and not pat.matches("x-orders-eu") and not pat.matches("orders")


def test_specific_offsets_and_batch_rules() -> None:
    opts = parse_source_options(
        {**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":5,"1":-2}}', "endingOffsets": '{"t":{"0":-1,"1":9}}'},
        streaming=False,
    )
    assert opts.starting.offsets == {TopicPartition("t", 0): 5, TopicPartition("t", 1): EARLIEST}
    assert opts.ending is not None and opts.ending.offsets == {TopicPartition("t", 0): LATEST, TopicPartition("t", 1): 9}
    with pytest.raises(OptionError, match="starting offset can't be latest"):
        parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(OptionError, match="starting offset can't be latest"):
        parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, streaming=False)
    with pytest.raises(OptionError, match="ending offset can't be earliest"):
        parse_source_options({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, streaming=False)
    with pytest.raises(OptionError, match="not valid in streaming"):
        parse_source_options({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="Expected e.g."):
        parse_source_options({**BOOT, "subscribe": "t", "startingOffsets": "{bad"}, streaming=False)


def test_timestamp_options_take_precedence() -> None:
    opts = parse_source_options(
        {**BOOT, "subscribe": "t", "startingTimestamp": "1000", "startingOffsetsByTimestamp": '{"t":{"0":5}}',
         "startingOffsets": "earliest", "startingOffsetsByTimestampStrategy": "latest"},
        streaming=True,
    )
    assert opts.starting.kind == "global_timestamp" and opts.starting.timestamp == 1000
    assert opts.starting.strategy == "latest"
    by_ts = parse_source_options(
        {**BOOT, "subscribe": "t", "startingOffsetsByTimestamp": '{"t":{"0":5}}'}, streaming=True
    )
    assert by_ts.starting.kind == "timestamp" and by_ts.starting.timestamps == {TopicPartition("t", 0): 5}
    assert by_ts.starting.strategy == "error"


def test_forbidden_kafka_options() -> None:
    with pytest.raises(OptionError, match="auto.offset.reset"):
        parse_source_options({**BOOT, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, streaming=False)
    with pytest.raises(OptionError, match="value.serializer"):
        parse_sink_options({**BOOT, "kafka.value.serializer": "x"})
    assert parse_sink_options({**BOOT, "topic": "out"}).topic == "out"


def test_kafka_params_map_to_kafka_python() -> None:
    params = {
        "bootstrap.servers": "a:1, b:2",
        "client.id": "spark",
        "request.timeout.ms": "40000",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache...PlainLoginModule required username="u" password="p";',
        "group.id": "ignored",
        "ssl.truststore.location": "/nowhere",
    }
    consumer = consumer_config(params)
    assert consumer["bootstrap_servers"] == ["a:1", "b:2"]
    assert consumer["request_timeout_ms"] == 40000 and consumer["client_id"] == "spark"
    assert consumer["sasl_plain_username"] == "u" and consumer["sasl_plain_password"] == "p"
    assert consumer["group_id"] is None and consumer["enable_auto_commit"] is False
    assert "ssl_truststore_location" not in consumer
    producer = producer_config({"bootstrap.servers": "a:1", "acks": "all", "linger.ms": "5", "compression.type": "lz4"})
    assert producer == {"bootstrap_servers": ["a:1"], "acks": "all", "linger_ms": 5, "compression_type": "lz4"}


def test_offset_json_round_trip_is_canonical() -> None:
    offsets = {TopicPartition("b", 10): 3, TopicPartition("a", 2): 1, TopicPartition("b", 9): 0}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"] and list(as_json["b"]) == ["9", "10"]
    assert offsets_from_json(as_json) == offsets


def test_min_partitions_splits_proportionally() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    ranges = [OffsetRange(a, 0, 300), OffsetRange(b, 0, 100), OffsetRange(TopicPartition("t", 2), 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges are dropped
    split = split_ranges(ranges, 4)
    assert [r for r in split if r.tp == b] == [OffsetRange(b, 0, 100)]
    pieces = [r for r in split if r.tp == a]
    assert len(pieces) == 3 and pieces[0].from_offset == 0 and pieces[-1].until_offset == 300
    assert all(x.until_offset == y.from_offset for x, y in zip(pieces, pieces[1:], strict=False))
