"""The `tidelog` PySpark data source: Spark's Kafka connector options and row schema on Spark 4's Python Data
Source API, reading and writing through kafka-python.

Batch reads plan one input partition per topic-partition offset range; streaming reads use per-partition
offsets ({"topic": {"0": 42}}, the connector's own offset JSON) as the stream offset, so Structured Streaming
checkpoints and restarts resume exactly where they stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

try:  # PySpark >= 4.2: admission control (read limits) and Trigger.AvailableNow for Python sources.
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - PySpark 4.0/4.1 call latestOffset() without arguments

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


from tidelog.pipeline.offsets import OffsetReader, report_data_loss
from tidelog.pipeline.options import (
    SourceOptions,
    TopicPartition,
    offsets_from_json,
    offsets_to_json,
    parse_sink_options,
    parse_source_options,
)
from tidelog.pipeline.reading import OffsetRange, read_arrow, read_rows, split_ranges
from tidelog.pipeline.sink import TidelogBatchWriter, TidelogStreamWriter

log = logging.getLogger(__name__)

# The connector's schema (KafkaRecordToRowConverter.kafkaSchema), with headers only when includeHeaders=true.
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
)
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"


class KafkaInputPartition(InputPartition):
    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range


class TidelogDataSource(DataSource):
    """format("tidelog"): the options of Spark's Kafka source and sink (see docs/PIPELINE.md)."""

    @classmethod
    def name(cls) -> str:
        return "tidelog"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return f"{KAFKA_SCHEMA}, {HEADERS_FIELD}" if include else KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return TidelogBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_schema(schema)
        return TidelogStreamReader(parse_source_options(self.options, streaming=True), schema)

    def _check_schema(self, schema: StructType) -> None:
        names = [part.split()[0] for part in KAFKA_SCHEMA.split(", ")]
        if self.schema() != KAFKA_SCHEMA:
            names.append("headers")
        if [f.name for f in schema.fields] != names:
            raise ValueError("Kafka source has a fixed schema and cannot be set with a custom one")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _check_save_mode(overwrite)
        return TidelogBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # Output modes other than append make no sense for a log; the connector accepts them all the same and
        # simply appends every row it is given, so this does too.
        return TidelogStreamWriter(parse_sink_options(self.options), schema)


def _check_save_mode(overwrite: bool) -> None:
    if overwrite:
        # KafkaSourceProvider.createRelation: only Append and ErrorIfExists are allowed for Kafka.
        raise ValueError(
            "Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and ErrorIfExists (default)."
        )


def _read(options: SourceOptions, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    """Runs on an executor: Arrow batches when this PySpark can describe the schema in Arrow, else tuples."""
    if not isinstance(partition, KafkaInputPartition):
        return  # Spark runs a single placeholder partition when partitions() planned none: nothing to read
    try:
        # optional: PySpark's Arrow support (pandas, pyarrow); tuples without it
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(schema, timezone="UTC")
    except (ImportError, TypeError):  # pragma: no cover - older PySpark
        arrow_schema = None
    if arrow_schema is None:
        yield from read_rows(options.kafka_params, partition.offset_range, options.include_headers,
                             options.fail_on_data_loss, options.poll_timeout_ms)
    else:
        yield from read_arrow(options.kafka_params, partition.offset_range, arrow_schema,
                              options.fail_on_data_loss, options.poll_timeout_ms)


class TidelogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        reader = OffsetReader(self.options)
        try:
            tps = reader.partitions()
            assert self.options.ending is not None
            starts = reader.resolve(self.options.starting, tps, "startingOffsets")
            ends = reader.resolve(self.options.ending, tps, "endingOffsets")
        finally:
            reader.close()
        ranges = []
        for tp in tps:
            if starts[tp] > ends[tp]:
                # KafkaSource/KafkaRelation: a range that ends before it starts is a bad option, not data loss.
                raise ValueError(
                    f"The starting offset {starts[tp]} of {tp.topic}-{tp.partition} is greater than its ending "
                    f"offset {ends[tp]}"
                )
            ranges.append(OffsetRange(tp, starts[tp], ends[tp]))
        return [KafkaInputPartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, self.schema, partition)


class TidelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"topic": {"partition": next offset to read}} for every partition the query reads."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._offsets = OffsetReader(options)
        self._last_end: dict[str, Any] | None = None  # for PySpark < 4.2, which calls latestOffset() bare
        self._available_now: dict[TopicPartition, int] | None = None

    def initialOffset(self) -> dict[str, Any]:
        # Resolved once, when the query is new; a restarted query continues from its checkpointed offset.
        tps = self._offsets.partitions()
        offsets = self._offsets.resolve(self.options.starting, tps, "startingOffsets")
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._offsets.latest(self._offsets.partitions())

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return offsets_to_json(self._offsets.latest(self._offsets.partitions()))

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        if start is None:
            start = self._last_end
        if self._available_now is not None:
            # Trigger.AvailableNow: never past what existed when the query started.
            latest = dict(self._available_now)
        else:
            latest = self._offsets.latest(self._offsets.partitions())
        if start is not None:
            begin = offsets_from_json(start)
            if isinstance(limit, ReadMaxRows) or (limit is None and self.options.max_offsets_per_trigger):
                max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
                latest = self._rate_limit(begin, latest, int(max_rows or 0))
        end = offsets_to_json(latest)
        self._last_end = end
        return end

    def _rate_limit(
        self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int], limit: int
    ) -> dict[TopicPartition, int]:
        """maxOffsetsPerTrigger: share the limit across partitions in proportion to their backlog; a partition
        with any backlog advances by at least one offset (the connector's rateLimit)."""
        new_parts = [tp for tp in latest if tp not in begin]
        begin = dict(begin)
        begin.update(self._offsets.earliest(new_parts))
        sizes = {tp: latest[tp] - begin[tp] for tp in latest if latest[tp] > begin[tp]}
        total = sum(sizes.values())
        if total <= limit:
            return latest
        result = dict(latest)
        for tp, size in sizes.items():
            share = limit * size / total
            step = int(share) if share >= 1 else 1
            result[tp] = min(begin[tp] + step, latest[tp])
        return result

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        fail = self.options.fail_on_data_loss
        new_parts = [tp for tp in until if tp not in begin]
        if new_parts:
            # Partitions (and topics) that appeared after the query started are read from their beginning.
            earliest = self._offsets.earliest(new_parts)
            for tp in new_parts:
                begin[tp] = earliest[tp]
        gone = sorted(set(begin) - set(until))
        if gone:
            report_data_loss(fail, f"{gone} are gone")
        ranges = []
        for tp in sorted(until):
            if until[tp] < begin[tp]:
                report_data_loss(fail, f"Partition {tp.topic}-{tp.partition}'s offset was changed from "
                                 f"{begin[tp]} to {until[tp]}")
                continue
            ranges.append(OffsetRange(tp, begin[tp], until[tp]))
        return [KafkaInputPartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        # Progress lives in Spark's checkpoint; like the connector, nothing is committed to Kafka.
        self._last_end = end

    def stop(self) -> None:
        self._offsets.close()
