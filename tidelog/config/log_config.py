"""The effective configuration of one log (Kafka's `LogConfig`): what storage and the cleaner read.

Built by `config.topic_config` from topic overrides layered over broker defaults; storage code only ever
sees this resolved, typed view. Attribute names are the Kafka topic config names with '.' -> '_'.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

LONG_MAX = 9_223_372_036_854_775_807


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The resolved configuration of one log, one attribute per Kafka topic config."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    confluent_key_schema_validation: bool = False
    confluent_key_subject_name_strategy: str = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    confluent_value_schema_validation: bool = False
    confluent_value_subject_name_strategy: str = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def schema_validation(self) -> bool:
        """Confluent's broker-side Schema ID Validation is on for the key or the value."""
        return self.confluent_key_schema_validation or self.confluent_value_schema_validation

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_values(self, **values: Any) -> LogConfig:
        return replace(self, **values)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]
