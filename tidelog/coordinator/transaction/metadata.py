"""Kafka's `TransactionState` and `TransactionMetadata` (one per transactional id)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum

from tidelog.storage import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32_767
TV_2 = 2  # Kafka's TransactionVersion.TV_2: the epoch is bumped at every transaction end (KIP-890 part 2)


class TransactionState(IntEnum):
    """The byte ids are what `TransactionLogValue.TransactionStatus` stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """The name DescribeTransactions / ListTransactions report (Kafka's TransactionState.stateName)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TransactionState.EMPTY: "Empty", TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit", TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit", TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead", TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TransactionState
# Kafka's TransactionState.validPreviousStates
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # TV2 may abort a transaction with no partition (Empty, or after the last one completed): KIP-890 part 2
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # the epoch before the last bump (KIP-360 retries)
    previous_producer_id: int = NO_PRODUCER_ID
    # KIP-890 part 2: the producer id a TV2 transaction end moves to when the epoch is exhausted (set while
    # prepared), and the transaction version of the client that began the transaction
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def copy(self) -> TransactionMetadata:
        return replace(self, partitions=set(self.partitions))

    def transition(self, target: TransactionState) -> TransactionMetadata:
        """A copy in state `target` (checked against Kafka's valid transitions); the caller persists it."""
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(f"transactional id {self.transactional_id}: "
                                         f"{self.state.state_name} -> {target.state_name}")
        new = self.copy()
        new.state = target
        return new

    @property
    def in_prepare(self) -> bool:
        return self.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)

    @property
    def supports_epoch_bump(self) -> bool:
        return self.client_transaction_version >= TV_2

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        # Kafka bumps to a fresh producer id when the epoch would reach Short.MaxValue
        return self.producer_epoch >= MAX_PRODUCER_EPOCH - 1

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            out.setdefault(tp.topic, []).append(tp.partition)
        return out
