"""Named fault points of the transaction coordinator, for `tidelog.storage.fault_hooks` hook objects.

The coordinator calls `hooks.at(TxnFaultPoint.X, transactional_id)` at each step of ending a transaction,
with the broker's hooks (`BrokerState.fault_hooks`): `run_broker(fault_hooks=...)` in a test, or
`tidelog serve --crash-at txn-after-prepare` (storage's `ExitAt`), which ends the process abruptly there as a
SIGKILL would.
"""

from __future__ import annotations

from enum import StrEnum


class TxnFaultPoint(StrEnum):
    BEFORE_PREPARE = "txn-before-prepare"    # EndTxn accepted, PrepareCommit/PrepareAbort not yet written
    AFTER_PREPARE = "txn-after-prepare"      # the prepare record is in __transaction_state, no marker yet
    BETWEEN_MARKERS = "txn-between-markers"  # the first of several markers is written
    BEFORE_COMPLETE = "txn-before-complete"  # every marker written, CompleteCommit/CompleteAbort not yet
