"""What a batch that is now in the log changes besides the log itself: producer state, the leader-epoch cache
and the segment's `.txnindex`. One function for the append path and for recovery, so the two cannot drift
(Kafka: UnifiedLog.updateProducers / analyzeAndValidateProducerState on append, the same
ProducerAppendInfo + LeaderEpochFileCache.assign + TransactionIndex.append in LogLoader's recovery loop).
"""

from __future__ import annotations

import logging

from tidelog.protocol.record_batch import RecordBatchHeader
from tidelog.storage.leader_epoch import LeaderEpochFileCache
from tidelog.storage.producer_state import CompletedTxn, ProducerStateManager
from tidelog.storage.transaction_index import AbortedTxn, TransactionIndex

log = logging.getLogger(__name__)


def apply_written_batch(
    header: RecordBatchHeader,
    control_batch: bytes | bytearray | memoryview | None,
    producer_state: ProducerStateManager,
    epoch_cache: LeaderEpochFileCache,
    txn_index: TransactionIndex,
    now_ms: int,
    strict: bool = False,
) -> CompletedTxn | None:
    """Apply one batch (offsets assigned, bytes already in the segment whose `.txnindex` is `txn_index`).

    `control_batch` is the batch's bytes when it is a control batch (read for COMMIT/ABORT and the
    coordinator epoch), else None. An ABORT marker that completes a transaction appends its AbortedTxn
    (producer id, first offset, marker offset, LSO once it is done) to `txn_index`.

    `strict=False` (the append path): a failed write of the epoch checkpoint or `.txnindex` is logged and
    swallowed, the record is already in the log and recovery rebuilds both from it. `strict=True`
    (recovery): errors propagate, recovery decides what to do with the segment."""
    if header.partition_leader_epoch >= 0:
        try:
            epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        except OSError as e:
            if strict:
                raise
            # In memory it is updated; the next successful write (or recovery) persists it.
            log.error("could not write leader-epoch-checkpoint %s: %s", epoch_cache.checkpoint, e)
    completed = producer_state.update(header, control_batch, now_ms)
    if completed is not None and completed.is_aborted:
        entry = AbortedTxn(
            completed.producer_id,
            completed.first_offset,
            completed.last_offset,
            producer_state.last_stable_offset(completed),
        )
        try:
            txn_index.append(entry)
        except (OSError, ValueError) as e:
            if strict:
                raise
            # The marker is in the log; recovery rebuilds .txnindex from it if this entry is lost.
            log.error("could not write aborted txn to %s: %s", txn_index.path, e)
    return completed
