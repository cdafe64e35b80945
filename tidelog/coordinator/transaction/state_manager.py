"""Kafka's `TransactionStateManager`: the cache of transactional ids and `__transaction_state`.

Every state change of a transactional id is one record (TransactionLogKey -> TransactionLogValue, see
records.py) in partition `abs(hashCode(id)) % transaction.state.log.num.partitions` of the compacted
internal topic. The cache changes only after the record is in the log, so replaying the topic from its
start (load()) rebuilds exactly what was acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from tidelog.clock import Clock
from tidelog.coordinator.group.store import partition_for
from tidelog.coordinator.internal_topic import iter_stored_batches
from tidelog.coordinator.transaction import records as rec
from tidelog.coordinator.transaction.config import TransactionConfig
from tidelog.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.records import Record, build_batch, iter_records
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"


def _append_error(code: ErrorCode) -> ErrorCode:
    """How Kafka maps a failed state-log append (TransactionStateManager.appendTransactionToLog)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def to_value(meta: TransactionMetadata, transaction_version: int = 0) -> rec.TransactionLogValue:
    """The record of `meta`; `transaction_version` is the finalized `transaction.version`: from level 1 the value is
    written in the flexible v1 layout with the tagged fields KIP-890 adds (TransactionVersion.transactionLogValueVersion)."""
    # Kafka writes a null partition list for Empty (and an empty one otherwise)
    partitions = None if meta.state is TransactionState.EMPTY else meta.topics()
    value = rec.TransactionLogValue(
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, transaction_timeout_ms=meta.txn_timeout_ms,
        transaction_status=int(meta.state), transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=meta.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms=meta.txn_start_timestamp_ms, version=1 if transaction_version >= 1 else 0)
    if value.version >= 1:
        value.previous_producer_id = meta.previous_producer_id
        value.next_producer_id = meta.next_producer_id
        value.client_transaction_version = meta.client_transaction_version
    return value


def from_value(transactional_id: str, value: rec.TransactionLogValue) -> TransactionMetadata:
    partitions = {TopicPartition(t, p) for t, ids in (value.transaction_partitions or {}).items() for p in ids}
    return TransactionMetadata(
        transactional_id, value.producer_id, value.producer_epoch, value.transaction_timeout_ms,
        TransactionState(value.transaction_status), partitions, value.transaction_start_timestamp_ms,
        value.transaction_last_update_timestamp_ms, previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id, client_transaction_version=value.client_transaction_version)


class TransactionStateManager:
    def __init__(self, topics: Any, config: TransactionConfig, clock: Clock,
                 transaction_version: Callable[[], int] = lambda: 0) -> None:
        self._topics = topics
        # the finalized `transaction.version` (Kafka's TransactionStateManager.transactionVersionLevel)
        self.transaction_version_level = transaction_version
        self.config = config
        self.clock = clock
        self.num_partitions = config.transaction_state_log_num_partitions
        self.transactions: dict[str, TransactionMetadata] = {}
        self._by_producer_id: dict[int, str] = {}
        self.loading = False
        self.load_time_ms = 0

    # ------------------------------------------------------------------------------------------ topic
    def ensure_topic(self) -> None:
        info = self._topics.get(TRANSACTION_STATE_TOPIC_NAME)
        if info is None:
            info = self._topics.ensure_internal_topic(TRANSACTION_STATE_TOPIC_NAME, self.num_partitions)
        self.num_partitions = info.partitions  # an existing topic decides, as Kafka reads it from metadata

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # ------------------------------------------------------------------------------------------ cache
    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None:
        tid = self._by_producer_id.get(producer_id)
        return None if tid is None else self.transactions.get(tid)

    def _put(self, meta: TransactionMetadata) -> None:
        old = self.transactions.get(meta.transactional_id)
        if old is not None and old.producer_id != meta.producer_id:
            self._by_producer_id.pop(old.producer_id, None)
        self.transactions[meta.transactional_id] = meta
        self._by_producer_id[meta.producer_id] = meta.transactional_id

    def _remove(self, transactional_id: str) -> None:
        old = self.transactions.pop(transactional_id, None)
        if old is not None:
            self._by_producer_id.pop(old.producer_id, None)

    # ------------------------------------------------------------------------------------------ writes
    def _append(self, transactional_id: str, value: bytes | None) -> None:
        self.ensure_topic()
        tp = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, self.partition_for(transactional_id))
        log_ = self._topics.log(tp)
        if log_ is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{tp} is missing")
        batch = build_batch([Record(0, self.clock.milliseconds(), rec.encode_key(transactional_id), value)], 0)
        log_.append_as_leader(bytes(batch), from_client=False)

    def append_transaction_to_log(self, new: TransactionMetadata) -> ErrorCode:
        """Write `new` as the id's state; on success it replaces the cached metadata."""
        new.txn_last_update_timestamp_ms = self.clock.milliseconds()
        try:
            self._append(new.transactional_id,
                         rec.encode_value(to_value(new, self.transaction_version_level())))
        except KafkaError as e:
            log.warning("writing transactional id %s (%s) to %s failed: %s", new.transactional_id,
                        new.state.state_name, TRANSACTION_STATE_TOPIC_NAME, e.code.name)
            return _append_error(e.code)
        except OSError as e:
            log.warning("writing transactional id %s failed: %s", new.transactional_id, e)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._put(new)
        return ErrorCode.NONE

    def remove_expired_transactional_ids(self) -> list[str]:
        """Kafka's removeExpiredTransactionalIds: ids idle in a completed state longer than
        transactional.id.expiration.ms get a tombstone and leave the cache."""
        now = self.clock.milliseconds()
        removed = []
        for tid, meta in list(self.transactions.items()):
            if meta.state not in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                  TransactionState.COMPLETE_ABORT):
                continue
            if meta.txn_last_update_timestamp_ms + self.config.transactional_id_expiration_ms > now:
                continue
            try:
                self._append(tid, None)
            except (KafkaError, OSError) as e:
                log.warning("cannot write tombstone for expired transactional id %s: %s", tid, e)
                continue
            self._remove(tid)
            removed.append(tid)
        if removed:
            log.info("removed %d expired transactional id(s)", len(removed))
        return removed

    # ------------------------------------------------------------------------------------------- load
    def _records(self) -> Iterator[tuple[bytes, bytes | None]]:
        info = self._topics.get(TRANSACTION_STATE_TOPIC_NAME)
        if info is None:
            return
        self.num_partitions = info.partitions
        for batch in iter_stored_batches(self._topics, TRANSACTION_STATE_TOPIC_NAME, info.partitions):
            if batch.header.is_control:
                continue
            for record in iter_records(batch.data, batch.pos):
                if record.offset >= batch.fetch_offset and record.key is not None:
                    yield record.key, record.value

    def load(self) -> None:
        """Replay `__transaction_state` (Kafka's loadTransactionMetadata); the last record per id wins."""
        self.loading = True
        started = self.clock.monotonic_ms()
        try:
            loaded: dict[str, TransactionMetadata] = {}
            count = 0
            for key, value in self._records():
                count += 1
                try:
                    tid = rec.decode_key(key)
                    if value is None:
                        loaded.pop(tid, None)
                    else:
                        loaded[tid] = from_value(tid, rec.decode_value(value))
                except (rec.RecordFormatError, ValueError) as e:
                    log.warning("skipping undecodable %s record: %s", TRANSACTION_STATE_TOPIC_NAME, e)
            self.transactions = {}
            self._by_producer_id = {}
            for meta in loaded.values():
                self._put(meta)
            log.info("loaded %d transactional id(s) from %d %s record(s)", len(loaded), count,
                     TRANSACTION_STATE_TOPIC_NAME)
        finally:
            self.loading = False
            self.load_time_ms = self.clock.monotonic_ms() - started
