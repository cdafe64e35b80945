"""ListOffsets (key 2): offsets by timestamp, earliest, latest and max timestamp (Kafka's UnifiedLog.fetchOffsetByTimestamp,
docs/PROTOCOL.md). Versions 1-11. The tiered-storage specs need their version (-4 v8, -5 v9, -6 v11) and are
UNSUPPORTED_VERSION below it; v10 only adds `timeout_ms` for remote reads, which a node without tiered storage
never waits on.
"""

from __future__ import annotations

import logging
from typing import Any

from tidelog.broker.apis._shared import check_leader_epoch, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, Op, authorized_names
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

API_KEY = 2
NOTES = """earliest (−2), latest (−1, LSO for read_committed), by timestamp, max timestamp (−3, v7);
tiered-storage specs answered as a node without tiered storage (UnifiedLog.fetchOffsetByTimestamp):
earliest-local (−4, v8) = log start, latest-tiered (−5, v9) and earliest-pending-upload (−6, v11) = offset −1,
epoch −1, no error; a spec below its version is UNSUPPORTED_VERSION; v10's `timeout_ms` (remote reads) never
waits"""

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023
# The first ListOffsets version that may carry each special timestamp (Kafka's ListOffsetsRequest).
_MIN_VERSION_FOR = {LATEST_TIMESTAMP: 0, EARLIEST_TIMESTAMP: 0, MAX_TIMESTAMP: 7,
                    EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9,
                    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1


def _lookup(ctx: RequestContext, tp: TopicPartition, p: Any, request: Any) -> tuple[ErrorCode, int, int, int]:
    """(error, timestamp, offset, leader epoch) for one partition."""
    log_obj = ctx.broker.topics.log(tp)
    if log_obj is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1
    error = check_leader_epoch(log_obj, p.current_leader_epoch if ctx.api_version >= 4 else -1)
    if error != ErrorCode.NONE:
        return error, -1, -1, -1
    ts = p.timestamp
    if ts < 0 and ctx.api_version < _MIN_VERSION_FOR.get(ts, 1 << 30):
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1, -1
    # Kafka's Partition.fetchOffsetForTimestamp: clients are bounded by HW (or LSO for read_committed);
    # replicas and debugging tools (replica_id != -1) see up to LEO.
    if request.replica_id != CONSUMER_REPLICA_ID:
        bound = log_obj.log_end_offset
    elif ctx.api_version >= 2 and request.isolation_level == READ_COMMITTED:
        bound = log_obj.last_stable_offset
    else:
        bound = log_obj.high_watermark
    if ts == LATEST_TIMESTAMP:
        return ErrorCode.NONE, -1, bound, log_obj.leader_epoch
    if ts in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        # Kafka's UnifiedLog without remote storage: no tiered offset, answered as (-1, -1, epoch -1), no error.
        return ErrorCode.NONE, -1, -1, -1
    found = log_obj.fetch_offset_for_timestamp(ts)
    if found is None:
        return ErrorCode.NONE, -1, -1, -1
    found_ts, offset, epoch = found
    earliest = ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP)
    if request.replica_id == CONSUMER_REPLICA_ID and not earliest and offset >= bound:
        # An offset clients may not read yet is reported as "not found" (also for -3, KIP-734).
        return ErrorCode.NONE, -1, -1, -1
    return ErrorCode.NONE, found_ts, offset, epoch


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    T = cls.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    seen: set[TopicPartition] = set()
    duplicates: set[TopicPartition] = set()
    for t in request.topics or []:
        for p in t.partitions or []:
            tp = TopicPartition(t.name, p.partition_index)
            (duplicates if tp in seen else seen).add(tp)
    topics = []
    describable = authorized_names(ctx, Op.DESCRIBE, TOPIC, [t.name for t in request.topics or []])
    for topic in request.topics or []:
        partitions = []
        for p in topic.partitions or []:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in describable:  # KafkaApis.handleListOffsetRequest: DESCRIBE per topic
                error, ts, offset, epoch = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1
            elif tp in duplicates:
                # Kafka answers every copy of a partition listed twice with INVALID_REQUEST.
                error, ts, offset, epoch = ErrorCode.INVALID_REQUEST, -1, -1, -1
            else:
                try:
                    error, ts, offset, epoch = _lookup(ctx, tp, p, request)
                except KafkaError as e:
                    error, ts, offset, epoch = e.code, -1, -1, -1
                except Exception:
                    log.exception("ListOffsets for %s failed", tp)
                    error, ts, offset, epoch = ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, -1
            partitions.append(P(partition_index=p.partition_index, error_code=error, old_style_offsets=[],
                                timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(T(name=topic.name, partitions=partitions))
    return cls(throttle_time_ms=0, topics=topics)
