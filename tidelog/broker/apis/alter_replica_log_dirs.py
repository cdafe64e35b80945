"""AlterReplicaLogDirs (key 34, KIP-113): move partitions between this broker's log dirs, with the checks of
Kafka's KafkaApis.handleAlterReplicaLogDirsRequest (CLUSTER ALTER) and ReplicaManager.alterReplicaLogDirs.
The move itself runs in the background (tidelog.storage.replica_alter_log_dirs); the answer says it started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.security.authorizer import Op, authorize_cluster
from tidelog.storage import TopicPartition

API_KEY = 34
NOTES = """KIP-113 online move between `log.dirs` (Kafka 4.3's range; v0 removed in Kafka 4.0); CLUSTER ALTER
(else CLUSTER_AUTHORIZATION_FAILED for every partition), LOG_DIR_NOT_FOUND for a path that is not a log dir,
KAFKA_STORAGE_ERROR for an offline dir, INVALID_TOPIC_EXCEPTION when the `-future` dir name would exceed 255
bytes, UNKNOWN_TOPIC_OR_PARTITION (the preferred dir is still recorded, as Kafka); NONE means the move started
(docs/STORAGE.md "Moving a partition between log dirs")"""

LOG_DIR_NOT_FOUND = 57
MAX_DIR_NAME = 255  # KAFKA-4893: the `-future` dir name must fit a file name


def alter_one(ctx: RequestContext, tp: TopicPartition, path: str) -> int:
    manager = ctx.broker.log_manager
    target = Path(path)
    if target not in manager.log_dirs:  # LogManager.isLogDirOnline: LogDirNotFoundException
        return LOG_DIR_NOT_FOUND
    if len(f"{tp.topic}-{tp.partition}.{'0' * 32}-future") > MAX_DIR_NAME:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if not manager.is_log_dir_online(target):
        return ErrorCode.KAFKA_STORAGE_ERROR
    info = ctx.broker.topics.get(tp.topic)
    if info is None or not 0 <= tp.partition < info.partitions or manager.get_log(tp) is None:
        manager.maybe_update_preferred_log_dir(tp, target)  # as Kafka: the log is created there later
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        manager.alter_log_dirs.alter(tp, target)
    except OSError:
        return ErrorCode.KAFKA_STORAGE_ERROR
    return ErrorCode.NONE


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.AlterReplicaLogDirTopicResult
    P = T.AlterReplicaLogDirPartitionResult
    wanted: dict[TopicPartition, str] = {}
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[TopicPartition(t.name, p)] = d.path
    allowed = authorize_cluster(ctx, Op.ALTER)
    results: dict[str, list[Any]] = {}
    for tp, path in wanted.items():
        code = alter_one(ctx, tp, path) if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results.setdefault(tp.topic, []).append(P(partition_index=tp.partition, error_code=code))
    return cls(throttle_time_ms=0, results=[T(topic_name=name, partitions=parts) for name, parts in results.items()])
