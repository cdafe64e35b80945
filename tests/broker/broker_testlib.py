"""Shared by the raw-protocol broker suites (test_produce, test_fetch, test_list_offsets) and the transaction
model (tests/transactions/test_model.py): api keys, request builders, record batches and topic set-up. The
socket client is tidelog.testing.KafkaWire."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.messages import _install_lazy_kafka_package, request_class
from tidelog.protocol.records import Record, build_batch
from tidelog.testing import KafkaWire

_install_lazy_kafka_package()

TS = 1_700_000_000_000
PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
FIND_COORDINATOR, OFFSET_FOR_LEADER_EPOCH = 10, 23


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1,
                    version: int = 9, transactional_id: str | None = None) -> Any:
    cls = request_class(PRODUCE)[version]
    T = cls.TopicProduceData
    return cls(transactional_id=transactional_id, acks=acks, timeout_ms=30_000,
               topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])])


def produce(client: KafkaWire, topic: str, records: bytes | None, partition: int = 0, acks: int = -1,
            version: int = 9) -> Any:
    response = client.request(PRODUCE, version, produce_request(topic, partition, records, acks, version))
    [topic_response] = response.responses
    [partition_response] = topic_response.partition_responses
    return partition_response


def batch(n: int = 1, key: bytes | None = b"k", value: bytes = b"v", compression: int = 0, ts: int = TS,
          start: int = 0) -> bytes:
    return bytes(build_batch([Record(i, ts + i, key, value + b"%d" % (start + i)) for i in range(n)], 0,
                             compression=compression))


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})])
    finally:
        admin.close()


def topic_id(client: KafkaWire, topic: str) -> uuid.UUID:
    cls = request_class(METADATA)[12]
    response = client.request(METADATA, 12, cls(topics=[cls.MetadataRequestTopic(topic_id=None, name=topic)],
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    [t] = response.topics
    return t.topic_id


def fetch_request(partitions: list[tuple[Any, int, int]], *, version: int = 12, max_wait_ms: int = 0,
                  min_bytes: int = 1, max_bytes: int = 50 * 1024 * 1024, partition_max_bytes: int = 1 << 20,
                  isolation_level: int = 0, session_id: int = 0, session_epoch: int = -1,
                  current_leader_epoch: int = -1) -> Any:
    """partitions: (topic name or topic id, partition, fetch offset); consecutive entries share a topic."""
    cls = request_class(FETCH)[version]
    T = cls.FetchTopic
    P = T.FetchPartition
    topics: list[Any] = []
    for key, partition, offset in partitions:
        if not topics or topics[-1][0] != key:
            topics.append((key, []))
        topics[-1][1].append(P(partition=partition, current_leader_epoch=current_leader_epoch,
                               fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                               partition_max_bytes=partition_max_bytes))
    fetch_topics = [T(topic_id=k, partitions=ps) if version >= 13 else T(topic=k, partitions=ps)
                    for k, ps in topics]
    return cls(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
               isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
               topics=fetch_topics, forgotten_topics_data=[], rack_id="")


def fetch(client: KafkaWire, partitions: list[tuple[Any, int, int]], version: int = 12, **kw: Any) -> Any:
    return client.request(FETCH, version, fetch_request(partitions, version=version, **kw))


def partition_data(response: Any) -> list[Any]:
    return [p for t in response.responses for p in t.partitions]
