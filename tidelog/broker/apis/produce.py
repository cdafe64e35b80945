"""Produce (key 0): append one record batch per partition (Kafka's ProduceRequest and LogValidator, Kafka's LogValidator).

Served 3-13, advertised from 0 (KAFKA-18659: librdkafka < 2.11.1 only compresses when Produce v0 is in the
broker's range; nobody actually sends v0-2 because clients pick the highest common version). A transactional
batch must go to a partition of its ongoing transaction (KIP-890 part 1; refused INVALID_TXN_STATE through v10,
TRANSACTION_ABORTABLE from v11), except that v12+ on a node that finalizes `transaction.version` 2 adds the
partition to the transaction itself (KIP-890 part 2, Kafka's AddPartitionsToTxnManager `addPartition`). v13 names
topics by id (KIP-516): an unknown id is answered UNKNOWN_TOPIC_ID per partition, and the response echoes the id.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidelog.broker.apis._shared import topic_by_id, topic_id_bytes
from tidelog.broker.context import CloseConnection, RequestContext
from tidelog.broker.features import TRANSACTION_VERSION
from tidelog.coordinator.transaction.metadata import TV_2
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.produce_codec import PartitionProduceResponse, ProduceResponseData
from tidelog.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_SIZE,
    MAGIC_OFFSET,
    TRANSACTIONAL_FLAG,
    read_header,
)
from tidelog.protocol.records import ZSTD
from tidelog.security.authorizer import TOPIC, TRANSACTIONAL_ID, Op, authorize, authorized_names
from tidelog.storage import TopicPartition
from tidelog.storage.log import Log, LogAppendInfo
from tidelog.storage.log_validator import RecordCheck

if TYPE_CHECKING:
    from tidelog.broker.state import BrokerState
    from tidelog.broker.topics import TopicManager

log = logging.getLogger(__name__)

API_KEY = 0
NOTES = """v0–2 advertised but refused, as Kafka 4 does (KAFKA-18659: librdkafka < 2.11.1, e.g. kcat 2.0.2,
only compresses when Produce v0 is in range). Transactional batches verified against the transaction (KIP-890
part 1: INVALID_TXN_STATE through v10, TRANSACTION_ABORTABLE from v11); v12+ with `transaction.version` 2 adds
the partition to the transaction (KIP-890 part 2). v13 names topics by id (KIP-516): unknown id →
UNKNOWN_TOPIC_ID per partition, WRITE checked on the resolved name, the response echoes the id. acks=0 gets no
response"""

ADMIN_CLIENT_ID = "__admin_client"  # Kafka lets only this client id write to internal topics
ZSTD_MIN_VERSION = 7  # KIP-110
ABORTABLE_SINCE = 11  # KIP-890 part 1: TRANSACTION_ABORTABLE instead of INVALID_TXN_STATE
IMPLICIT_ADD_SINCE = 12  # KIP-890 part 2: the partition joins the transaction with its first batch
TOPIC_ID_MIN_VERSION = 13  # KIP-516


def _result(error: ErrorCode, message: str | None = None) -> PartitionProduceResponse:
    """A failed partition's answer (its index is set by the caller): base offset -1, record errors none."""
    return PartitionProduceResponse(-1, error, -1, -1, -1, [], message)


def _precheck_records(records: bytes | memoryview | None, version: int) -> ErrorCode:
    """ProduceRequest-level checks Kafka makes before the log sees the data (ProduceRequest.validateRecords)."""
    if records is None:
        return ErrorCode.INVALID_RECORD
    if len(records) >= HEADER_SIZE and records[MAGIC_OFFSET] == 2:
        codec = records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
        if codec == ZSTD and version < ZSTD_MIN_VERSION:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return ErrorCode.NONE


def _verify_transaction(ctx: RequestContext, tp: TopicPartition, records: bytes | memoryview) -> ErrorCode:
    """KIP-890 part 1: a transactional batch only goes to a partition added to its ongoing transaction.
    (A client's control batch is left to LogValidator, which refuses it with INVALID_RECORD.)"""
    if not _transactional(records) or records[ATTRIBUTES_OFFSET + 1] & CONTROL_FLAG:
        return ErrorCode.NONE
    services = ctx.broker.services.get_or_none()
    if services is None:
        # the coordinator is loading: the producer retries (AddPartitionsToTxnManager answers a verification the
        # coordinator cannot make yet with a retriable error)
        return ErrorCode.NOT_ENOUGH_REPLICAS
    header = read_header(records)
    coordinator = services.txn_coordinator
    error = coordinator.verify_transactional_produce(tp, header.producer_id, header.producer_epoch)
    if error == ErrorCode.INVALID_TXN_STATE and ctx.api_version >= ABORTABLE_SINCE:
        return ErrorCode.TRANSACTION_ABORTABLE  # AddPartitionsToTxnManager keeps the 120 for v11+
    return error


def _implicit_add(ctx: RequestContext, request: Any, names: list[str | None]) -> dict[TopicPartition, ErrorCode]:
    """KIP-890 part 2 (Produce v12+, `transaction.version` 2): every existing partition that receives a
    transactional batch joins the producer's transaction in one coordinator call, as the partition leader's
    AddPartitionsToTxn (verifyOnly false) does; the coordinator's answer per partition, with Kafka's mapping of
    PRODUCER_FENCED to INVALID_PRODUCER_EPOCH and of an unavailable coordinator to NOT_ENOUGH_REPLICAS."""
    topics = ctx.broker.topics
    wanted: list[TopicPartition] = []
    producer: tuple[int, int] | None = None
    for topic, name in zip(request.topic_data or [], names, strict=True):
        if name is None or (info := topics.get(name)) is None or info.internal:
            continue
        for p in topic.partition_data or []:
            records = p.records
            if records is None or not 0 <= p.index < info.partitions or not _transactional(records) \
                    or records[ATTRIBUTES_OFFSET + 1] & CONTROL_FLAG:
                continue
            header = read_header(records)
            if producer is None:
                producer = (header.producer_id, header.producer_epoch)
            if producer == (header.producer_id, header.producer_epoch):
                wanted.append(TopicPartition(name, p.index))
    if producer is None:
        return {}
    services = ctx.broker.services.get_or_none()
    if services is None:
        return dict.fromkeys(wanted, ErrorCode.NOT_ENOUGH_REPLICAS)
    try:
        error = services.txn_coordinator.handle_add_partitions(request.transactional_id, producer[0], producer[1],
                                                               wanted, TV_2)
    except KafkaError as e:
        error = e.code
    if error == ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    elif error in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                   ErrorCode.NOT_COORDINATOR):
        error = ErrorCode.NOT_ENOUGH_REPLICAS
    return dict.fromkeys(wanted, error)


def _writable_log(topics: TopicManager, tp: TopicPartition, records: bytes | memoryview | None, version: int, acks: int,
                  client_id: str | None) -> Log | PartitionProduceResponse:
    """The partition's log when Kafka's checks before the log (all but the transaction's) let its batch through,
    else the partition's failed answer."""
    info = topics.get(tp.topic)
    if info is None or not 0 <= tp.partition < info.partitions:
        return _result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if info.internal and client_id != ADMIN_CLIENT_ID:
        return _result(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {tp.topic}")
    error = _precheck_records(records, version)
    if error != ErrorCode.NONE:
        return _result(error)
    log_obj = topics.log(tp)
    if log_obj is None:
        return _result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if acks == -1 and log_obj.config.min_insync_replicas > 1:
        # One replica is the whole ISR (Kafka's Partition.appendRecordsToLeader).
        return _result(ErrorCode.NOT_ENOUGH_REPLICAS,
                       f"ISR size 1 is below min.insync.replicas {log_obj.config.min_insync_replicas}")
    return log_obj


def _append(ctx: RequestContext, tp: TopicPartition, records: bytes | memoryview | None, acks: int,
            pending: list[tuple[Log, LogAppendInfo, PartitionProduceResponse]],
            added: dict[TopicPartition, ErrorCode]) -> PartitionProduceResponse:
    log_obj = _writable_log(ctx.broker.topics, tp, records, ctx.api_version, acks, ctx.client_id)
    if not isinstance(log_obj, Log):
        return log_obj
    assert records is not None
    error = added[tp] if tp in added else _verify_transaction(ctx, tp, records)
    if error != ErrorCode.NONE:
        return _result(error)
    check = _schema_check(ctx.broker, log_obj) if log_obj.config.schema_validation else None
    if isinstance(check, PartitionProduceResponse):
        return check
    return _append_to(log_obj, records, pending, check)


def _schema_check(broker: BrokerState, log_obj: Log) -> RecordCheck | PartitionProduceResponse:
    """Confluent's Schema ID Validation for a topic that turns it on (broker/schema_validation.py)."""
    from tidelog.broker.schema_validation import record_check  # lazy: only topics with validation on need it

    ids = broker.schema_ids
    if ids is None and int(broker.config.get("schema.registry.port")) >= 0:
        # the registry is still replaying _schemas: the producer retries
        return _result(ErrorCode.NOT_ENOUGH_REPLICAS, "The schema registry is loading")
    return record_check(log_obj.topic_partition.topic, log_obj.config, ids)


def _append_to(log_obj: Log, records: bytes | memoryview,
               pending: list[tuple[Log, LogAppendInfo, PartitionProduceResponse]],
               record_check: RecordCheck | None = None) -> PartitionProduceResponse:
    """Append one partition's batch; an append the flush policy must fsync first goes to `pending`."""
    try:
        appended = log_obj.append_as_leader(records, log_obj.leader_epoch, defer_flush=True,
                                            record_check=record_check)
    except KafkaError as e:
        return PartitionProduceResponse(-1, e.code, -1, -1, -1, e.record_errors or [], e.message)
    result = PartitionProduceResponse(-1, ErrorCode.NONE, appended.first_offset, appended.log_append_time,
                                      appended.log_start_offset, [], None)
    if appended.flush_required:
        pending.append((log_obj, appended, result))
    return result


def _guarded(tp: TopicPartition, append: Callable[..., PartitionProduceResponse],
             *args: Any) -> PartitionProduceResponse:
    """One partition's append, for `handle` and `handle_plain` alike: an unexpected error fails that partition
    only (UNKNOWN_SERVER_ERROR, as Kafka's ReplicaManager.appendToLocalLog answers per partition)."""
    try:
        return append(*args)
    except Exception as e:  # noqa: BLE001 - never let one partition take the request down
        log.exception("produce to %s failed", tp)
        return _result(ErrorCode.UNKNOWN_SERVER_ERROR, str(e))


async def flush_pending(broker: BrokerState,
                        pending: list[tuple[Log, LogAppendInfo, PartitionProduceResponse]]) -> None:
    """fsyncs the flush policy asks for run on workers, off the loop; each partition's result is final
    once its own fsync is done (a failed one answers KAFKA_STORAGE_ERROR)."""
    async def one(log_obj: Log, info: LogAppendInfo, result: PartitionProduceResponse) -> None:
        try:
            await broker.log_manager.flush_appended(log_obj, info)
        except (OSError, KafkaError) as e:
            log.error("flush of %s failed: %s", log_obj.topic_partition, e)
            result.error_code, result.base_offset, result.error_message = ErrorCode.KAFKA_STORAGE_ERROR, -1, str(e)

    await asyncio.gather(*(one(*p) for p in pending))


def _topic_names(ctx: RequestContext, request: Any) -> list[str | None]:
    """Each request topic's name: as sent up to v12, resolved from its id from v13 (None: unknown id)."""
    topic_data = request.topic_data or []
    if ctx.api_version < TOPIC_ID_MIN_VERSION:
        return [t.name for t in topic_data]
    names: list[str | None] = []
    for t in topic_data:
        info = topic_by_id(ctx, t.topic_id)
        names.append(None if info is None else info.name)
    return names


def _response_key(ctx: RequestContext, topic: Any, name: str | None) -> str | bytes:
    """What the response names a topic by: its name up to v12, the id the request sent from v13."""
    if ctx.api_version < TOPIC_ID_MIN_VERSION:
        assert name is not None
        return name
    return topic_id_bytes(topic.topic_id, bytes(16))


async def handle(ctx: RequestContext, request: Any) -> Any | None:
    acks = request.acks
    results: list[tuple[str | bytes, list[PartitionProduceResponse]]] = []
    # KafkaApis.handleProduceRequest: WRITE on the transactional id, then WRITE per topic (by name, after a
    # v13 topic id is resolved). Without an authorizer everything is allowed (nothing to compute per request).
    transactional_id = request.transactional_id
    names = _topic_names(ctx, request)
    if ctx.broker.security.authorizer is None:
        txn_denied, writable = False, None
    else:
        txn_denied = transactional_id is not None and not authorize(ctx, Op.WRITE, TRANSACTIONAL_ID,
                                                                    transactional_id)
        writable = authorized_names(ctx, Op.WRITE, TOPIC, [n for n in names if n is not None])
    pending: list[tuple[Log, LogAppendInfo, PartitionProduceResponse]] = []
    added: dict[TopicPartition, ErrorCode] = {}
    if ctx.api_version >= IMPLICIT_ADD_SINCE and transactional_id and not txn_denied and acks in (-1, 0, 1) \
            and ctx.broker.features.level(TRANSACTION_VERSION) >= TV_2:
        allowed = names if writable is None else [n if n in writable else None for n in names]
        added = _implicit_add(ctx, request, allowed)
    for topic, name in zip(request.topic_data or [], names, strict=True):
        partitions = []
        for p in topic.partition_data or []:
            if txn_denied:
                result = _result(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            elif name is None:
                result = _result(ErrorCode.UNKNOWN_TOPIC_ID)
            elif writable is not None and name not in writable:
                result = _result(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif acks not in (-1, 0, 1):
                result = _result(ErrorCode.INVALID_REQUIRED_ACKS)
            else:
                tp = TopicPartition(name, p.index)
                result = _guarded(tp, _append, ctx, tp, p.records, acks, pending, added)
            result.index = p.index
            partitions.append(result)
        results.append((_response_key(ctx, topic, name), partitions))
    if pending:
        await flush_pending(ctx.broker, pending)

    if acks == 0:
        # No response to carry an error, so Kafka (KafkaApis.handleProduceRequest) closes the connection when
        # any partition failed: the client notices, reconnects and refreshes its metadata. Partitions that
        # succeeded stay appended, as in Kafka.
        failed = [f"{_describe(key)}-{r.index}: {ErrorCode(r.error_code).name}" for key, partitions in results
                  for r in partitions if r.error_code != ErrorCode.NONE]
        if failed:
            raise CloseConnection(f"error during acks=0 produce request with correlation id {ctx.correlation_id}"
                                  f" from client id {ctx.client_id!r} ({', '.join(failed)})")
        return None

    # Encoded by hand when the connection writes it (protocol/produce_codec.py); the client quotas may set its
    # throttle_time_ms first.
    return ProduceResponseData(ctx.api_version, results)


def handle_plain(broker: BrokerState, version: int, request: Any
                 ) -> tuple[ProduceResponseData, list[tuple[Log, LogAppendInfo, PartitionProduceResponse]]] | None:
    """The plain Produce request in one synchronous pass, without a RequestContext: what `handle` answers for
    v3-12 with acks 1 or -1, no transactional id, and non-transactional batches to existing partitions of
    non-internal topics whose min.insync.replicas is met and without Schema ID Validation (the connection calls
    it only with no authorizer, no quota to record and no armed fault). Every partition is checked before any is
    appended: None means nothing was appended and `handle` answers the request. The appends the flush policy
    must fsync are returned for `flush_pending`."""
    acks = request.acks
    if (acks != 1 and acks != -1) or request.transactional_id is not None or version >= TOPIC_ID_MIN_VERSION:
        return None
    topics = broker.topics
    planned: list[tuple[str, list[tuple[int, Log, bytes | memoryview]]]] = []
    for topic in request.topic_data:
        appends: list[tuple[int, Log, bytes | memoryview]] = []
        for p in topic.partition_data:
            records = p.records
            # No client id: an internal topic fails here too, and `handle` answers it with the real one.
            log_obj = _writable_log(topics, TopicPartition(topic.name, p.index), records, version, acks, None)
            if not isinstance(log_obj, Log) or _transactional(records) or log_obj.config.schema_validation:
                return None
            appends.append((p.index, log_obj, records))
        planned.append((topic.name, appends))
    pending: list[tuple[Log, LogAppendInfo, PartitionProduceResponse]] = []
    results: list[tuple[str | bytes, list[PartitionProduceResponse]]] = []
    for name, appends in planned:
        partitions = []
        for index, log_obj, records in appends:
            result = _guarded(log_obj.topic_partition, _append_to, log_obj, records, pending)
            result.index = index
            partitions.append(result)
        results.append((name, partitions))
    return ProduceResponseData(version, results), pending


def _transactional(records: bytes | memoryview) -> bool:
    """A v2 batch with the transactional (or control) bit: `handle` verifies it against the transaction."""
    return (len(records) >= HEADER_SIZE and records[MAGIC_OFFSET] == 2
            and bool(records[ATTRIBUTES_OFFSET + 1] & (TRANSACTIONAL_FLAG | CONTROL_FLAG)))


def _describe(key: str | bytes) -> str:
    return key if isinstance(key, str) else str(uuid.UUID(bytes=key))
