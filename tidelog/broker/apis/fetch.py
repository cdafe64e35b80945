"""Fetch (key 1): raw log slices with long polling (Kafka's LocalLog.read, docs/PROTOCOL.md).

* Versions 4-18 (17 and 18 add follower-only tagged partition fields, KIP-853 / KIP-1166, that a broker
  without followers ignores). v13+ names topics by id (looked up with TopicManager.by_id); Java and librdkafka switch to it
  as soon as Metadata returns real topic ids.
* Fetch sessions (KIP-227, v7+): `broker/fetch_session.py` (Kafka's FetchSessionCache) decides which
  partitions an incremental request reads (its whole session) and which the response carries (those with news).
* KIP-74: request max_bytes and partition_max_bytes are soft limits for the first partition that has data,
  which always gets at least one whole batch; later partitions get only what fits.
* Long poll: with fewer than min_bytes available the request parks in the FetchPurgatory until an append to
  one of its partitions or max_wait_ms, then the partitions are read again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.broker import fetch_session
from tidelog.broker.apis._shared import check_leader_epoch
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.fetch_codec import FetchPartitionResponse, FetchResponseData, FetchTopicResponse
from tidelog.protocol.file_records import FileRecords
from tidelog.protocol.records import ZSTD
from tidelog.security.authorizer import TOPIC, Op, authorized_names
from tidelog.storage import TopicPartition

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)

API_KEY = 1
NOTES = """topic ids from v13; v17/v18 tagged partition fields (ReplicaDirectoryId, KIP-853; HighWatermark,
KIP-1166) are follower-only and ignored; long poll in the fetch purgatory; KIP-74 size limits. Incremental
fetch sessions (KIP-227, `broker/fetch_session.py`, Kafka's FetchSessionCache):
`max.incremental.fetch.session.cache.slots` (1000), eviction of stale then least valuable sessions,
incremental responses carry only partitions with news; metrics NumIncrementalFetchSessions,
NumIncrementalFetchPartitionsCached, IncrementalFetchSessionEvictions on Prometheus"""

TOPIC_ID_MIN_VERSION = 13
ZSTD_MIN_VERSION = 10
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1
INVALID_SESSION_ID = fetch_session.INVALID_SESSION_ID
INITIAL_EPOCH = fetch_session.INITIAL_EPOCH
FINAL_EPOCH = fetch_session.FINAL_EPOCH
INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class _Partition:
    """One requested partition and what the last read found for it."""
    topic_key: Any  # the topic name (v4-12) or uuid.UUID (v13+), echoed in the response
    name: str | None
    request: Any
    log: Log | None = None
    error: ErrorCode = ErrorCode.NONE
    records: FileRecords | bytes = b""  # a slice of the segment file: sent with sendfile (frame_stream.py)
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted: list[tuple[int, int]] | None = None


@dataclass(slots=True)
class _FetchParams:
    version: int
    max_bytes: int
    min_bytes: int
    isolation_level: int
    replica_id: int


def _resolve(ctx: RequestContext, request: Any) -> list[_Partition]:
    topics = ctx.broker.topics
    by_id = ctx.api_version >= TOPIC_ID_MIN_VERSION
    parts = []
    for topic in request.topics or []:
        if by_id:
            key = topic.topic_id
            raw = key.bytes if isinstance(key, uuid.UUID) else bytes(key or b"")
            info = topics.by_id(raw) if any(raw) else None
            name = info.name if info is not None else None
            unknown = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            key = topic.topic
            name = key
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for p in topic.partitions or []:
            part = _Partition(key, name, p)
            if name is None:
                part.error = unknown
            parts.append(part)
    return parts


def _upper_bound(log_obj: Log, params: _FetchParams) -> int:
    if params.replica_id >= 0:
        return log_obj.log_end_offset  # a follower reads to LEO (no followers exist on one node)
    if params.isolation_level == READ_COMMITTED:
        return log_obj.last_stable_offset
    return log_obj.high_watermark


def _aborted_transactions(log_obj: Log, fetch_offset: int, data: FileRecords) -> list[tuple[int, int]]:
    """(producer id, first offset) of aborted transactions overlapping the returned bytes
    (Kafka: LocalLog.collectAbortedTransactions over the segments' `.txnindex`)."""
    # The bound is Kafka's (LocalLog.addAbortedTransactions): the first offset-index entry at or after the
    # slice's end, so no batch is read for it; it may reach a few batches past the slice (the client skips
    # aborted transactions it never reads). A slice whose segment went away since falls back to walking its
    # batch headers (one pread each) for the offset after the last one returned.
    upper = None
    if data.segment_base_offset is not None:
        upper = log_obj.fetch_upper_bound_offset(data.segment_base_offset, data.position + data.size)
    if upper is None:
        upper = fetch_offset
        for _, header in data.batch_headers():
            upper = max(upper, header.next_offset)
    return [(t.producer_id, t.first_offset) for t in log_obj.collect_aborted_transactions(fetch_offset, upper)]


def _read_all(ctx: RequestContext, parts: list[_Partition], params: _FetchParams) -> tuple[int, bool]:
    """Read every partition (KIP-74 limits). Returns (bytes read, whether any partition has an error)."""
    remaining = params.max_bytes
    min_one_batch = True  # until some partition returns data
    total = 0
    has_error = False
    topics = ctx.broker.topics
    for part in parts:
        part.records = b""
        part.aborted = None
        if part.name is None:
            has_error = True
            continue
        log_obj = topics.log(TopicPartition(part.name, part.request.partition))
        part.log = log_obj
        if log_obj is None:
            part.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            has_error = True
            continue
        part.error = check_leader_epoch(log_obj, getattr(part.request, "current_leader_epoch", -1))
        if part.error == ErrorCode.NONE:
            part.error = _read_partition(part, log_obj, params, min(part.request.partition_max_bytes, remaining),
                                         min_one_batch)
        if part.error != ErrorCode.NONE:
            part.high_watermark = part.last_stable_offset = part.log_start_offset = -1
            has_error = True
            continue
        size = len(part.records)
        if size:
            min_one_batch = False
            remaining = max(0, remaining - size)
            total += size
    return total, has_error


def _release(parts: list[_Partition]) -> None:
    for part in parts:
        if isinstance(part.records, FileRecords):
            part.records.close()
        part.records = b""


def _read_partition(part: _Partition, log_obj: Log, params: _FetchParams, max_bytes: int,
                    min_one_batch: bool) -> ErrorCode:
    # Offsets are taken before the read so the slice never runs past the HW the response reports.
    hw = log_obj.high_watermark
    lso = log_obj.last_stable_offset
    part.log_start_offset = log_obj.log_start_offset
    part.high_watermark, part.last_stable_offset = hw, lso
    fetch_offset = part.request.fetch_offset
    try:
        # A slice of the segment file (Kafka's FileRecords): the connection sends it with sendfile.
        data = log_obj.read_slice(fetch_offset, max(0, max_bytes), _upper_bound(log_obj, params), min_one_batch)
        if data is not None and params.version < ZSTD_MIN_VERSION and _has_zstd(data):
            # Fetch v10 is the first that may carry zstd batches (KIP-110); older readers get an error.
            data.close()
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if data is not None and params.isolation_level == READ_COMMITTED:
            part.aborted = _aborted_transactions(log_obj, fetch_offset, data)
    except KafkaError as e:
        return e.code
    except Exception:  # a storage bug answers this partition with an error instead of failing the request
        log.exception("fetch from %s-%d failed", part.name, part.request.partition)
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if data is None:
        part.records = b""
        if params.isolation_level == READ_COMMITTED:
            part.aborted = []
    else:
        part.records = data
    return ErrorCode.NONE


def _has_zstd(data: FileRecords) -> bool:
    return any(header.compression == ZSTD for _, header in data.batch_headers())


def _topic_key(key: Any, by_id: bool) -> str | bytes:
    if not by_id:
        return str(key)
    return key.bytes if isinstance(key, uuid.UUID) else bytes(key or bytes(16))


def _response(ctx: RequestContext, parts: list[_Partition], error: ErrorCode = ErrorCode.NONE,
              session_id: int = INVALID_SESSION_ID) -> FetchResponseData:
    """Encoded by hand (protocol/fetch_codec.py) when written: the records stay separate pieces."""
    by_id = ctx.api_version >= TOPIC_ID_MIN_VERSION
    topics: list[FetchTopicResponse] = []
    last_key: Any = object()
    for part in parts:
        if part.topic_key != last_key or not topics:
            # consecutive partitions of one topic share a topic entry, as in the request
            topics.append(FetchTopicResponse(_topic_key(part.topic_key, by_id), []))
            last_key = part.topic_key
        topics[-1].partitions.append(FetchPartitionResponse(
            part.request.partition, part.error, part.high_watermark, part.last_stable_offset,
            part.log_start_offset, part.aborted, part.records))
    return FetchResponseData(ctx.api_version, int(error), session_id, topics)


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None and getattr(state, "replica_id", -1) >= 0:
        return int(state.replica_id)
    replica_id = getattr(request, "replica_id", CONSUMER_REPLICA_ID)
    return CONSUMER_REPLICA_ID if replica_id is None else int(replica_id)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    max_bytes = getattr(request, "max_bytes", INT32_MAX)
    params = _FetchParams(version, INT32_MAX if max_bytes is None else max_bytes, request.min_bytes,
                          getattr(request, "isolation_level", 0) or 0, _replica_id(request))
    session_ctx = None
    cache: fetch_session.FetchSessionCache | None = ctx.broker.fetch_sessions
    if version >= 7:
        session_ctx, parts_or_error = _session_context(ctx, request, params, cache)
        if isinstance(parts_or_error, int):
            return _response(ctx, [], ErrorCode(parts_or_error))
        parts = parts_or_error
    else:
        parts = _resolve(ctx, request)
    names = [p.name for p in parts]  # the session caches names as resolved, before authorization
    # KafkaApis.handleFetchRequest: READ per topic (consumers), else TOPIC_AUTHORIZATION_FAILED per partition
    readable = authorized_names(ctx, Op.READ, TOPIC, {p.name for p in parts if p.name is not None})
    for part in parts:
        if part.name is not None and part.name not in readable:
            part.name, part.error = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    total, has_error = _read_all(ctx, parts, params)
    purgatory = ctx.broker.purgatory
    loop = asyncio.get_running_loop()
    # The wait is an asyncio timer (loop time), not the injectable Clock: a ManualClock must not stall it.
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    # Kafka answers at once on any partition error, on enough data, with nothing to wait for, or max_wait 0.
    while not has_error and total < params.min_bytes and parts and purgatory is not None:
        remaining = int((deadline - loop.time()) * 1000)
        if remaining <= 0:
            break
        logs = [p.log for p in parts if p.log is not None]
        _release(parts)  # every partition is read again after the wait: no fd held while parked
        woken = await purgatory.wait_for_append(logs, remaining)
        total, has_error = _read_all(ctx, parts, params)
        if not woken:
            break
    if session_ctx is None or cache is None:
        return _response(ctx, parts)
    return _session_response(ctx, cache, session_ctx, parts, names)


def _session_context(ctx: RequestContext, request: Any, params: _FetchParams,
                     cache: fetch_session.FetchSessionCache | None) -> tuple[Any, list[_Partition] | int]:
    """The request's fetch session context (KIP-227) and the partitions to read, or an error code."""
    session_id = getattr(request, "session_id", INVALID_SESSION_ID)
    epoch = getattr(request, "session_epoch", FINAL_EPOCH)
    if cache is None:  # no cache: only sessionless fetches
        if session_id != INVALID_SESSION_ID:
            return None, ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
            return None, ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return None, _resolve(ctx, request)
    by_id = ctx.api_version >= TOPIC_ID_MIN_VERSION
    fetch_data, forgotten = fetch_session.request_data(request, by_id, lambda key: _topic_name(ctx, key))
    context = fetch_session.new_context(cache, session_id, epoch, by_id, params.replica_id >= 0, fetch_data,
                                        forgotten)
    if context.kind == "error":
        return context, context.error
    if context.kind == "incremental":
        cached = fetch_session.session_partitions(context)
        parts = [_Partition(c.topic_key, c.name, c) for c in cached]
        for part in parts:
            if part.name is None:
                part.error = ErrorCode.UNKNOWN_TOPIC_ID
        return context, parts
    return context, _resolve(ctx, request)


def _topic_name(ctx: RequestContext, key: Any) -> str | None:
    raw = key.bytes if isinstance(key, uuid.UUID) else bytes(key or b"")
    info = ctx.broker.topics.by_id(raw) if any(raw) else None
    return info.name if info is not None else None


def _session_response(ctx: RequestContext, cache: fetch_session.FetchSessionCache, context: Any,
                      parts: list[_Partition], names: list[str | None]) -> Any:
    results = [fetch_session.PartitionResult(p.topic_key, name, p.request, int(p.error), len(p.records),
                                             p.high_watermark, p.last_stable_offset, p.log_start_offset)
               for p, name in zip(parts, names, strict=True)]
    session_id, include = fetch_session.update_and_generate_response(cache, context, results)
    return _response(ctx, [p for p, keep in zip(parts, include, strict=True) if keep], session_id=session_id)
