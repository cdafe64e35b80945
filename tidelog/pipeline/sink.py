"""Writing a DataFrame to Kafka: the connector's sink (KafkaWriter / KafkaWriteTask) on kafka-python's producer.

Columns: value (string or binary, required), key (string or binary), topic (string), partition (int), headers
(array<struct<key string, value binary>>). As in the connector, the `topic` option, when set, overrides any
topic column; without a partition column Kafka's default partitioner (murmur2 of the key) picks the partition.
Delivery is at least once, like the connector: a retried task may produce its rows again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from tidelog.pipeline.client import new_producer
from tidelog.pipeline.options import SinkOptions


@dataclass
class ProducedCommitMessage(WriterCommitMessage):
    records: int


def validate_schema(schema: StructType, topic_option: str | None) -> None:
    """The connector's KafkaWriter.validateQuery, so a bad DataFrame fails before any task starts."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if topic_option is None:
        if "topic" not in fields:
            raise ValueError(
                "topic option required when no 'topic' attribute is present. Use the topic option for setting a "
                "topic."
            )
        if not isinstance(fields["topic"], StringType):
            raise ValueError(f"Topic type must be a StringType, got {fields['topic'].simpleString()}")
    if "value" not in fields:
        raise ValueError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise ValueError(f"{name} attribute type must be a StringType or BinaryType")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be an IntegerType, got {fields['partition'].simpleString()}")
    if "headers" in fields:
        headers = fields["headers"]
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
            == [("key", StringType), ("value", BinaryType)]
        )
        if not ok:
            raise ValueError(
                "headers attribute type must be an ArrayType of StructType(key: StringType, value: BinaryType), "
                f"got {headers.simpleString()}"
            )


def _bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


class _Producing:
    """The part shared by the batch and the streaming writer: one producer per Spark task."""

    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        validate_schema(schema, options.topic)
        self.options = options
        self.columns = {f.name.lower(): f.name for f in schema.fields}

    def produce(self, rows: Iterator[Row]) -> ProducedCommitMessage:
        cols = self.columns
        producer = new_producer(self.options.kafka_params)
        futures = []
        try:
            for row in rows:
                topic = self.options.topic or (row[cols["topic"]] if "topic" in cols else None)
                if topic is None:
                    raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
                headers = row[cols["headers"]] if "headers" in cols else None
                if headers and any(h["value"] is None for h in headers):
                    # Kafka allows null header values, but kafka-python's producer only sends bytes; failing
                    # beats silently turning null into empty bytes.
                    raise ValueError("a header with a null value cannot be written by the tidelog sink")
                futures.append(
                    producer.send(
                        topic,
                        value=_bytes(row[cols["value"]]),
                        key=_bytes(row[cols["key"]]) if "key" in cols else None,
                        partition=row[cols["partition"]] if "partition" in cols else None,
                        headers=[(h["key"], _bytes(h["value"])) for h in headers] if headers else None,
                    )
                )
            producer.flush()
            for future in futures:
                future.get()  # re-raises the first failed send; the task (and Spark's retry) fails with it
        finally:
            producer.close()
        return ProducedCommitMessage(records=len(futures))


class TidelogBatchWriter(_Producing, DataSourceWriter):
    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return self.produce(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # every row is acknowledged by the broker before its task reports success

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # produced records cannot be taken back (the connector has the same at-least-once contract)


class TidelogStreamWriter(_Producing, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return self.produce(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's name
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass
