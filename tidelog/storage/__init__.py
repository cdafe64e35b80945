"""Kafka-format log storage: partitions as logs of segments, byte-compatible with Kafka's log directory."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"
