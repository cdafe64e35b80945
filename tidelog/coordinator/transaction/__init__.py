"""Kafka's transaction coordinator for this single node (KIP-98; KIP-360 epoch bumps; KIP-447 group
fencing through the group coordinator; KIP-890 part 1 Produce verification).

* `coordinator.py`: TransactionCoordinator (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
  timeouts, Describe/ListTransactions, the Produce check).
* `state_manager.py`: TransactionStateManager (cache + `__transaction_state`, replay, id expiry).
* `metadata.py`: TransactionState and TransactionMetadata; `records.py`: TransactionLogKey/Value codec.
* `marker_channel.py`: writes COMMIT/ABORT markers with `Log.append_control_marker`.
* `fault_hooks.py`: named crash points (TxnFaultPoint) for the broker's fault hooks; `metrics.py`: Prometheus collector.
"""

from __future__ import annotations

from tidelog.coordinator.transaction.coordinator import (
    InitProducerIdResult,
    TransactionCoordinator,
    create_transaction_coordinator,
)
from tidelog.coordinator.transaction.metadata import TransactionMetadata, TransactionState
from tidelog.coordinator.transaction.state_manager import (
    TRANSACTION_STATE_TOPIC_NAME,
    TransactionStateManager,
)

__all__ = [
    "TRANSACTION_STATE_TOPIC_NAME",
    "InitProducerIdResult",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TransactionState",
    "TransactionStateManager",
    "create_transaction_coordinator",
]
