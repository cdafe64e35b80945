"""Kafka's `TransactionCoordinator` on a single node (KIP-98, KIP-360, KIP-447, KIP-890 parts 1 and 2).

Transactions v2 (KIP-890 part 2) are chosen per request, as Kafka does: EndTxn v5+ and AddPartitionsToTxn v4+
(and the partition leader's implicit add of Produce v12+ / TxnOffsetCommit v5+) are TV2, every older version
TV0. A TV2 transaction end bumps the epoch (PrepareCommit/PrepareAbort carry epoch + 1, the markers too), rolls
the producer id over when the epoch would pass Short.MaxValue - 1 (next_producer_id, taken at CompleteX), answers
the client the producer id and epoch it continues with, and may abort with no partition at all.

Every handler runs on the event loop thread and finishes its log writes before it returns, so state changes
of one transactional id never interleave. EndTxn writes PrepareCommit/PrepareAbort, then the markers, then
CompleteCommit/CompleteAbort; if a marker write fails the id stays prepared (other requests for it get
CONCURRENT_TRANSACTIONS) and a retry is scheduled. After a restart, load() finds prepared transactions and
completes them the same way.

Deadlines are operations on one keyed DeadlineTimer (tidelog.coordinator.timer, Kafka's CoordinatorTimer) on the
injected Clock's wall milliseconds: each ongoing transaction's timeout (txn_start_timestamp_ms + txn_timeout_ms,
Kafka's timedOutTransactions condition), each unfinished transaction's marker retry, and the periodic
transactional-id expiry. `run_periodic_tasks()` runs the due ones (tests on a ManualClock call it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tidelog.clock import Clock
from tidelog.coordinator.timer import DeadlineTimer
from tidelog.coordinator.transaction.config import TransactionConfig
from tidelog.coordinator.transaction.fault_hooks import TxnFaultPoint
from tidelog.coordinator.transaction.marker_channel import TransactionMarkerChannelManager
from tidelog.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_2,
    TransactionMetadata,
    TransactionState,
)
from tidelog.coordinator.transaction.metrics import register_metrics
from tidelog.coordinator.transaction.state_manager import TransactionStateManager
from tidelog.protocol.errors import ErrorCode
from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import NO_FAULTS

log = logging.getLogger(__name__)

TRANSACTION_VERSION_FEATURE = "transaction.version"  # Kafka's TransactionVersion.FEATURE_NAME

E = ErrorCode
S = TransactionState


@dataclass(slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class EndTxnResult:
    """EndTxn's answer; v5 carries the producer id and epoch the client continues with (-1 on errors)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(self, state: TransactionStateManager, markers: TransactionMarkerChannelManager,
                 allocate_producer_id: Callable[[], int], config: TransactionConfig, clock: Clock,
                 fault_hooks: Any = None) -> None:
        self.state = state
        # storage.fault_hooks objects; typed Any because FaultHooks.at names only storage's FaultPoint
        self.fault_hooks: Any = fault_hooks if fault_hooks is not None else NO_FAULTS
        markers.fault_hooks = self.fault_hooks
        self.markers = markers
        self._allocate_producer_id = allocate_producer_id
        self.config = config
        self.clock = clock
        self.active = False
        self.timer = DeadlineTimer(clock.milliseconds, "transaction coordinator")
        # Kafka's TransactionCoordinator metrics (see metrics.py)
        self.aborted_timed_out = 0
        self.completed = {True: 0, False: 0}

    # ----------------------------------------------------------------------------------------- lifecycle
    def startup(self, schedule: bool = True) -> None:
        """Replay `__transaction_state`, finish transactions a crash left prepared, schedule the deadlines
        (`schedule=False`: the event loop's timer is not armed; tests call run_periodic_tasks)."""
        self.state.load()
        self.active = True
        for meta in list(self.state.transactions.values()):
            if meta.in_prepare:
                log.info("completing %s of transactional id %s after restart", meta.state.state_name,
                         meta.transactional_id)
                self._send_markers_and_complete(meta)
            else:
                self._schedule_timeout(meta.transactional_id)
        self._schedule_id_expiry()
        if schedule:
            self.timer.start()

    def shutdown(self) -> None:
        self.active = False
        self.timer.stop()

    def run_periodic_tasks(self) -> None:
        """Run what is due: timed-out transactions aborted, unfinished markers retried, idle ids expired."""
        self.timer.run_due()

    # ------------------------------------------------------------------------------------------ timers
    def _schedule_timeout(self, transactional_id: str) -> None:
        """The transaction's timeout, if it is ongoing (Kafka aborts it once start + timeout has passed)."""
        meta = self.state.get(transactional_id)
        if meta is not None and meta.state is S.ONGOING:
            self.timer.schedule(("txn-timeout", transactional_id), meta.txn_start_timestamp_ms + meta.txn_timeout_ms,
                                lambda: self._on_txn_timeout(transactional_id))

    def _on_txn_timeout(self, transactional_id: str) -> None:
        """Kafka's abortTimedOutTransactions for one transaction: fence the producer (epoch bump) and abort."""
        meta = self.state.get(transactional_id)
        if meta is None or meta.state is not S.ONGOING:
            return
        if self.clock.milliseconds() < meta.txn_start_timestamp_ms + meta.txn_timeout_ms:
            self._schedule_timeout(transactional_id)  # a newer transaction of this id
            return
        log.info("aborting transaction of %s (producer id %d epoch %d): older than its timeout %d ms",
                 meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms)
        if self._fence_and_abort(meta) == E.NONE:
            self.aborted_timed_out += 1
        else:  # not written: try again after the abort interval, as Kafka's periodic abort task would
            self.timer.schedule(("txn-timeout", transactional_id), self._retry_at(),
                                lambda: self._on_txn_timeout(transactional_id))

    def _retry_at(self) -> int:
        return self.clock.milliseconds() + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms

    def _schedule_marker_retry(self, transactional_id: str) -> None:
        self.timer.schedule(("markers", transactional_id), self._retry_at(),
                            lambda: self._retry_markers(transactional_id))

    def _retry_markers(self, transactional_id: str) -> None:
        meta = self.state.get(transactional_id)
        if meta is not None and meta.in_prepare:
            self._send_markers_and_complete(meta)

    def _schedule_id_expiry(self) -> None:
        interval = self.config.transaction_remove_expired_transaction_cleanup_interval_ms
        self.timer.schedule(("expire-transactional-ids",), self.clock.milliseconds() + interval, self._expire_ids)

    def _expire_ids(self) -> None:
        self._schedule_id_expiry()
        self.state.remove_expired_transactional_ids()

    def _unavailable(self) -> ErrorCode | None:
        if self.state.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        return None

    def ensure_topic(self) -> ErrorCode:
        """FindCoordinator(TRANSACTION): Kafka creates `__transaction_state` on the first lookup."""
        try:
            self.state.ensure_topic()
        except Exception as e:  # noqa: BLE001 - any failure means "not available yet", the client retries
            log.warning("cannot create __transaction_state: %s", e)
            return E.COORDINATOR_NOT_AVAILABLE
        return E.NONE

    # ------------------------------------------------------------------------------------ InitProducerId
    def handle_init_producer_id(self, transactional_id: str, txn_timeout_ms: int, expected_producer_id: int = -1,
                                expected_epoch: int = -1) -> InitProducerIdResult:
        if not 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT)
        unavailable = self._unavailable()
        if unavailable is not None:
            return InitProducerIdResult(unavailable)
        meta = self.state.get(transactional_id)
        if meta is None or meta.state is S.DEAD:
            new = TransactionMetadata(transactional_id, self._allocate_producer_id(), 0, txn_timeout_ms)
            error = self.state.append_transaction_to_log(new)
            return InitProducerIdResult(error, new.producer_id, new.producer_epoch) if error == E.NONE \
                else InitProducerIdResult(error)
        if meta.in_prepare:
            return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        if expected_producer_id >= 0:
            # KIP-360: the producer says which id/epoch it holds
            if expected_producer_id == meta.producer_id and expected_epoch == meta.last_producer_epoch \
                    and meta.state is not S.ONGOING:
                return InitProducerIdResult(E.NONE, meta.producer_id, meta.producer_epoch)  # a retried bump
            if expected_producer_id == meta.previous_producer_id and meta.producer_epoch == 0 \
                    and meta.state is not S.ONGOING:
                return InitProducerIdResult(E.NONE, meta.producer_id, meta.producer_epoch)  # retried id rollover
            if expected_producer_id != meta.producer_id or expected_epoch != meta.producer_epoch:
                return InitProducerIdResult(E.PRODUCER_FENCED)
        if meta.state is S.ONGOING:
            # a new incarnation of the producer: fence the old epoch and abort its open transaction
            error = self._fence_and_abort(meta)
            if error != E.NONE:
                return InitProducerIdResult(error)
            tv2 = meta.supports_epoch_bump
            meta = self.state.get(transactional_id) or meta
            if meta.in_prepare or tv2:
                # Kafka answers CONCURRENT_TRANSACTIONS once the abort is under way and bumps again on the retry
                # (prepareInitProducerIdTransit); a TV1 transaction keeps this node's one-step answer
                return InitProducerIdResult(E.CONCURRENT_TRANSACTIONS)
        new = meta.transition(S.EMPTY)
        new.partitions = set()
        new.txn_start_timestamp_ms = -1
        new.txn_timeout_ms = txn_timeout_ms
        if meta.is_producer_epoch_exhausted:
            new.previous_producer_id = meta.producer_id
            new.producer_id = self._allocate_producer_id()
            new.producer_epoch = 0
            new.last_producer_epoch = -1
        else:
            new.producer_epoch = meta.producer_epoch + 1
            new.last_producer_epoch = meta.producer_epoch
        error = self.state.append_transaction_to_log(new)
        if error != E.NONE:
            return InitProducerIdResult(error)
        return InitProducerIdResult(E.NONE, new.producer_id, new.producer_epoch)

    # ------------------------------------------------------------------------- AddPartitions / AddOffsets
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int
                        ) -> tuple[ErrorCode, TransactionMetadata | None]:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable, None
        meta = self.state.get(transactional_id)
        if meta is None or meta.state is S.DEAD or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED, None
        return E.NONE, meta

    def handle_add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[TopicPartition], client_transaction_version: int = 0) -> ErrorCode:
        """AddPartitionsToTxn; `client_transaction_version` 2 for v4+ and the implicit adds of KIP-890 part 2
        (Kafka's TransactionVersion.transactionVersionForAddPartitionsToTxn), recorded with the transaction."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        wanted = set(partitions)
        if meta.in_prepare:
            return E.CONCURRENT_TRANSACTIONS
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            return E.NONE
        if meta.state not in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            return E.INVALID_TXN_STATE
        new = meta.transition(S.ONGOING)
        if meta.state is not S.ONGOING:
            new.partitions = set()
            new.txn_start_timestamp_ms = self.clock.milliseconds()
        new.partitions |= wanted
        new.client_transaction_version = client_transaction_version  # TransactionMetadata.prepareAddPartitions
        error = self.state.append_transaction_to_log(new)
        if error == E.NONE and meta.state is not S.ONGOING:
            self._schedule_timeout(transactional_id)
        return error

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with VerifyOnly (Kafka's handleVerifyPartitionsInTransaction): each partition
        NONE if it is in the transaction, else TRANSACTION_ABORTABLE; the producer's errors for all of them."""
        wanted = list(partitions)
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is not None and meta.in_prepare:
            error = E.CONCURRENT_TRANSACTIONS
        if meta is None or error != E.NONE:
            return dict.fromkeys(wanted, error)
        return {tp: E.NONE if tp in meta.partitions else E.TRANSACTION_ABORTABLE for tp in wanted}

    def check_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int) -> ErrorCode:
        """TxnOffsetCommit from a producer this coordinator does not know as is gets Kafka's producer errors."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        return E.NONE if meta.state is S.ONGOING else E.INVALID_TXN_STATE

    # ---------------------------------------------------------------------------------------- EndTxn
    def handle_end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        """EndTxn v0-4 (TV0: the epoch stays)."""
        return self.end_transaction(transactional_id, producer_id, producer_epoch, commit, 0).error

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        client_transaction_version: int) -> EndTxnResult:
        """EndTxn; `client_transaction_version` 2 for v5+ (TransactionVersion.transactionVersionForEndTxn)."""
        if client_transaction_version >= TV_2:
            return self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit)
        return EndTxnResult(self._end_txn_v1(transactional_id, producer_id, producer_epoch, commit))

    def _end_txn_v1(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        state = meta.state
        if state is S.ONGOING:
            return self._end_transaction(meta, commit)
        if state is S.COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE  # a retried commit succeeded already
        if state is S.COMPLETE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.NONE
        if state is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS
        return E.INVALID_TXN_STATE  # Empty, Dead, PrepareEpochFence

    def _end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> EndTxnResult:
        """Kafka's TransactionCoordinator.endTransaction for TV2: the same epoch as the coordinator's starts the
        next end; the epoch before the bump (or the exhausted one before a producer id rollover) is a retry of an
        end that completed, answered with the current producer id and epoch."""
        unavailable = self._unavailable()
        if unavailable is not None:
            return EndTxnResult(unavailable)
        meta = self.state.get(transactional_id)
        if meta is None or meta.state is S.DEAD:
            return EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        retry_on_overflow = (meta.previous_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH - 1
                             and meta.producer_epoch == 0)
        retry_on_bump = meta.producer_id == producer_id and meta.producer_epoch == producer_epoch + 1
        if meta.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(E.INVALID_PRODUCER_ID_MAPPING)
        state = meta.state
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid_epoch = producer_epoch == meta.producer_epoch
        if not valid_epoch:
            return EndTxnResult(E.PRODUCER_FENCED)
        is_retry = retry_on_bump or retry_on_overflow
        current = EndTxnResult(E.NONE, meta.producer_id, meta.producer_epoch)
        invalid = EndTxnResult(E.INVALID_TXN_STATE)
        if state is S.ONGOING:
            return self._end_transaction_v2(meta, commit, no_partition_added=False)
        if state is S.COMPLETE_COMMIT:
            if commit:
                return current if is_retry else invalid
            return invalid if is_retry else self._end_transaction_v2(meta, False, no_partition_added=True)
        if state is S.COMPLETE_ABORT:
            if commit:
                return invalid
            return current if is_retry else self._end_transaction_v2(meta, False, no_partition_added=True)
        if state is S.PREPARE_COMMIT:
            return EndTxnResult(E.CONCURRENT_TRANSACTIONS) if commit else invalid
        if state is S.PREPARE_ABORT:
            return invalid if commit else EndTxnResult(E.CONCURRENT_TRANSACTIONS)
        if state is S.EMPTY and not commit:
            return self._end_transaction_v2(meta, False, no_partition_added=True)
        return invalid  # Empty commit, PrepareEpochFence

    def _end_transaction_v2(self, meta: TransactionMetadata, commit: bool, no_partition_added: bool) -> EndTxnResult:
        """TransactionMetadata.prepareAbortOrCommit with TV2: epoch + 1 (the epoch before it is remembered for
        KIP-360 retries), a next producer id when the epoch is exhausted; then markers and CompleteX."""
        self.fault_hooks.at(TxnFaultPoint.BEFORE_PREPARE, meta.transactional_id)
        prepared = meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
        if meta.is_producer_epoch_exhausted:
            prepared.next_producer_id = self._allocate_producer_id()
        else:
            prepared.next_producer_id = NO_PRODUCER_ID
        # an epoch already at Short.MaxValue (a fenced producer) aborts without overflowing
        prepared.producer_epoch = min(meta.producer_epoch + 1, MAX_PRODUCER_EPOCH)
        prepared.last_producer_epoch = meta.producer_epoch
        prepared.client_transaction_version = TV_2
        if no_partition_added:
            # no partition, so no start time: Kafka uses the time of this end
            prepared.partitions = set()
            prepared.txn_start_timestamp_ms = self.clock.milliseconds()
        error = self.state.append_transaction_to_log(prepared)
        if error != E.NONE:
            return EndTxnResult(error)
        self.fault_hooks.at(TxnFaultPoint.AFTER_PREPARE, meta.transactional_id)
        # the client continues with what CompleteX will hold (Kafka answers once the prepare record is durable)
        if prepared.next_producer_id != NO_PRODUCER_ID:
            answer = EndTxnResult(E.NONE, prepared.next_producer_id, 0)
        else:
            answer = EndTxnResult(E.NONE, prepared.producer_id, prepared.producer_epoch)
        cached = self.state.get(meta.transactional_id)
        if cached is not None:
            self._send_markers_and_complete(cached)
        return answer

    def _end_transaction(self, meta: TransactionMetadata, commit: bool) -> ErrorCode:
        self.fault_hooks.at(TxnFaultPoint.BEFORE_PREPARE, meta.transactional_id)
        prepared = meta.transition(S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
        error = self.state.append_transaction_to_log(prepared)
        if error != E.NONE:
            return error
        self.fault_hooks.at(TxnFaultPoint.AFTER_PREPARE, meta.transactional_id)
        # Kafka answers EndTxn once the prepare record is durable; the markers follow (here: at once)
        cached = self.state.get(meta.transactional_id)
        if cached is not None:
            self._send_markers_and_complete(cached)
        return E.NONE

    def _send_markers_and_complete(self, prepared: TransactionMetadata) -> None:
        """The markers, then CompleteCommit/CompleteAbort; what fails is tried again later."""
        commit = prepared.state is S.PREPARE_COMMIT
        if not self.markers.write_markers(prepared, commit):
            self._schedule_marker_retry(prepared.transactional_id)
            return
        self.fault_hooks.at(TxnFaultPoint.BEFORE_COMPLETE, prepared.transactional_id)
        complete = prepared.transition(S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        complete.partitions = set()
        if prepared.supports_epoch_bump and prepared.next_producer_id != NO_PRODUCER_ID:
            # TransactionMetadata.prepareComplete: the epoch overflowed, the producer continues on the new id
            complete.previous_producer_id = prepared.producer_id
            complete.producer_id = prepared.next_producer_id
            complete.producer_epoch = 0
        complete.next_producer_id = NO_PRODUCER_ID
        if self.state.append_transaction_to_log(complete) == E.NONE:
            self.completed[commit] += 1
        else:
            self._schedule_marker_retry(prepared.transactional_id)

    def _fence_and_abort(self, meta: TransactionMetadata) -> ErrorCode:
        """Kafka's prepareFenceProducerEpoch + abort: the epoch is bumped (unless exhausted) so the old
        producer's writes and EndTxn are refused, then the transaction is aborted with the new epoch."""
        fenced = meta.transition(S.PREPARE_EPOCH_FENCE)
        if meta.supports_epoch_bump:
            # a TV2 transaction: one bump, up to Short.MaxValue (prepareFenceProducerEpoch; the abort that follows
            # does not bump again and takes no new producer id, TransactionCoordinator.endTransaction)
            fenced.producer_epoch = min(meta.producer_epoch + 1, MAX_PRODUCER_EPOCH)
            fenced.last_producer_epoch = NO_PRODUCER_EPOCH
            fenced.next_producer_id = NO_PRODUCER_ID
        elif not meta.is_producer_epoch_exhausted:
            fenced.producer_epoch += 1
        prepared = fenced.transition(S.PREPARE_ABORT)
        error = self.state.append_transaction_to_log(prepared)
        if error != E.NONE:
            return error
        cached = self.state.get(meta.transactional_id)
        if cached is not None:
            self._send_markers_and_complete(cached)
        return E.NONE

    # ---------------------------------------------------------------------------- KIP-890 part 1 (Produce)
    def verify_transactional_produce(self, tp: TopicPartition, producer_id: int, producer_epoch: int) -> ErrorCode:
        """A transactional batch may only go to a partition added to the producer's ongoing transaction."""
        meta = self.state.by_producer_id(producer_id)
        if meta is not None and producer_epoch < meta.producer_epoch:
            return E.INVALID_PRODUCER_EPOCH  # fenced (e.g. its transaction timed out): Kafka's PRODUCER_FENCED
        if meta is None or meta.state is not S.ONGOING or tp not in meta.partitions:
            return E.INVALID_TXN_STATE
        return E.NONE

    # ------------------------------------------------------------------------------------------- admin
    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable, None
        meta = self.state.get(transactional_id)
        if meta is None or meta.state is S.DEAD:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, meta

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[str], list[TransactionMetadata]]:
        """(error, unknown state filters, matching transactions) as Kafka's ListTransactions."""
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable, [], []
        wanted_states: set[TransactionState] = set()
        unknown = []
        for name in states:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted_states.add(state)
        pids = set(producer_ids)
        now = self.clock.milliseconds()
        out = []
        for meta in self.state.transactions.values():
            if meta.state is S.DEAD:
                continue
            if (states and meta.state not in wanted_states) or (pids and meta.producer_id not in pids):
                continue
            if duration_ms >= 0 and (meta.state is not S.ONGOING or now - meta.txn_start_timestamp_ms <= duration_ms):
                continue
            out.append(meta)
        return E.NONE, unknown, out


def create_transaction_coordinator(broker: Any, groups: Callable[[], Any] | None = None) -> TransactionCoordinator:
    """The coordinator for a BrokerState (its config, clock, TopicManager, producer ids and groups). `groups`
    gives the group coordinator (default `broker.groups`; the broker passes the one it is starting, since
    completing prepared transactions at start-up writes markers before the state's coordinators are served)."""
    config = TransactionConfig.from_broker_config(broker.config)
    features = getattr(broker, "features", None)

    def transaction_version() -> int:
        return features.level(TRANSACTION_VERSION_FEATURE) if features is not None else 0

    state = TransactionStateManager(broker.topics, config, broker.clock, transaction_version)
    markers = TransactionMarkerChannelManager(broker.topics, groups or (lambda: broker.groups), broker.clock)
    coordinator = TransactionCoordinator(state, markers, broker.producer_ids.generate_producer_id, config,
                                         broker.clock, getattr(broker, "fault_hooks", None))

    register_metrics(broker.metrics, coordinator)
    return coordinator
