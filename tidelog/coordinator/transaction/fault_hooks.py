"""Named fault points of the transaction coordinator, in the style of `tidelog.storage.fault_hooks`.

The coordinator calls `hooks.at(TxnFaultPoint.X, transactional_id)` at each step of ending a transaction;
`hooks` is the broker's fault-hook object (`BrokerState.fault_hooks`, e.g. from `run_broker(fault_hooks=...)`)
or, for `BrokerProcess` crash tests, `ExitAtTxn` built from `TIDELOG_TXN_CRASH_AT=<point>`, which ends the
process abruptly there (as a SIGKILL would).
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any

from tidelog.storage.fault_hooks import EXIT_CODE, NO_FAULTS

CRASH_ENV = "TIDELOG_TXN_CRASH_AT"


class TxnFaultPoint(StrEnum):
    BEFORE_PREPARE = "txn-before-prepare"    # EndTxn accepted, PrepareCommit/PrepareAbort not yet written
    AFTER_PREPARE = "txn-after-prepare"      # the prepare record is in __transaction_state, no marker yet
    BETWEEN_MARKERS = "txn-between-markers"  # the first of several markers is written
    BEFORE_COMPLETE = "txn-before-complete"  # every marker written, CompleteCommit/CompleteAbort not yet


class ExitAtTxn:
    def __init__(self, point: TxnFaultPoint | str) -> None:
        self.point = TxnFaultPoint(point)

    def at(self, point: object, subject: object = None) -> None:
        if point == self.point:
            os._exit(EXIT_CODE)


def coordinator_fault_hooks(broker_hooks: Any) -> Any:
    """The broker's hooks if it was given any, else the env-var crash point, else none."""
    if broker_hooks is not None and broker_hooks is not NO_FAULTS:
        return broker_hooks
    point = os.environ.get(CRASH_ENV)
    return ExitAtTxn(point) if point else NO_FAULTS
