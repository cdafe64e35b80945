"""Kafka's `TransactionMarkerChannelManager` for one node: instead of WriteTxnMarkers requests to partition
leaders, the COMMIT/ABORT control batch is appended straight to each partition's log through
`Log.append_control_marker` (which also completes the transaction in the producer state, .txnindex and the
LSO). A marker on a `__consumer_offsets` partition also settles the group's pending TxnOffsetCommit offsets
(Kafka's GroupCoordinator.onTransactionCompleted)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tidelog.coordinator.group.store import GROUP_METADATA_TOPIC_NAME
from tidelog.coordinator.transaction.fault_hooks import TxnFaultPoint
from tidelog.coordinator.transaction.metadata import TransactionMetadata
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage.fault_hooks import NO_FAULTS

log = logging.getLogger(__name__)

COORDINATOR_EPOCH = 0  # the leader epoch of the __transaction_state partition: one node, never re-elected


class TransactionMarkerChannelManager:
    def __init__(self, topics: Any, groups: Callable[[], Any], clock: Any) -> None:
        self._topics = topics
        self._groups = groups
        self._clock = clock
        self.markers_written = 0
        self.fault_hooks: Any = NO_FAULTS

    def write_markers(self, prepared: TransactionMetadata, commit: bool) -> bool:
        """Write the marker to every partition of `prepared` still without one (each success is removed from
        `prepared.partitions`). False if one failed: the transaction stays prepared and is retried."""
        ok = True
        for i, tp in enumerate(sorted(prepared.partitions)):
            if i == 1:
                self.fault_hooks.at(TxnFaultPoint.BETWEEN_MARKERS, prepared.transactional_id)
            info = self._topics.get(tp.topic)
            log_ = self._topics.log(tp) if info is not None else None
            if log_ is None:
                # the topic was deleted meanwhile: nothing left to mark (Kafka drops UNKNOWN_TOPIC_OR_PARTITION)
                prepared.partitions.discard(tp)
                continue
            tv2 = prepared.supports_epoch_bump
            try:
                log_.append_control_marker(prepared.producer_id, prepared.producer_epoch, COORDINATOR_EPOCH,
                                           commit, self._clock.milliseconds(), transaction_version=2 if tv2 else 0)
            except KafkaError as e:
                if tv2 and e.code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    # the partition is at this epoch or later: this marker is there already (written before a
                    # crash); Kafka's marker handler stops sending it (TransactionMarkerRequestCompletionHandler)
                    log.info("%s marker of transactional id %s already in %s: %s", "COMMIT" if commit else "ABORT",
                             prepared.transactional_id, tp, e)
                    prepared.partitions.discard(tp)
                    continue
                log.warning("writing %s marker of transactional id %s to %s failed: %s",
                            "COMMIT" if commit else "ABORT", prepared.transactional_id, tp, e)
                ok = False
                continue
            except OSError as e:
                log.warning("writing %s marker of transactional id %s to %s failed: %s",
                            "COMMIT" if commit else "ABORT", prepared.transactional_id, tp, e)
                ok = False
                continue
            self.markers_written += 1
            prepared.partitions.discard(tp)
            if tp.topic == GROUP_METADATA_TOPIC_NAME:
                groups = self._groups()
                if groups is not None:
                    groups.on_transaction_completed(tp.partition, prepared.producer_id, commit)
        return ok
