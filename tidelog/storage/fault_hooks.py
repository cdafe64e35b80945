"""Named fault-injection points of storage and the cleaner, for crash and slow-disk tests.

Production code calls `hooks.at(point, subject)` at each named step; the default `NO_FAULTS` does nothing.
Tests (and `tidelog serve --crash-at STEP`, honoured only when given) pass an object that acts at one point:
`ExitAt` ends the process abruptly there (as a SIGKILL would), a test's own class may block or sleep.
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Protocol


class FaultPoint(StrEnum):
    # Cleaner swap steps (Kafka's UnifiedLog.replaceSegments order), see docs/STORAGE.md "Cleaner swap".
    CLEANED = "cleaned"  # the .cleaned segment is complete and flushed, nothing renamed yet
    SWAP = "swap"  # .cleaned renamed .swap
    DELETED_FIRST = "deleted-first"  # the first replaced segment renamed .deleted
    DELETED = "deleted"  # the last replaced segment renamed .deleted
    LIVE = "live"  # .swap renamed to the final name
    BEFORE_CHECKPOINT = "before-checkpoint"  # the pass is done, cleaner-offset-checkpoint not yet written
    # Flush: just before a partition's segments are fsynced (subject: the TopicPartition).
    FSYNC = "fsync"
    # AlterReplicaLogDirs move steps (Kafka's ReplicaAlterLogDirsThread / LogManager.replaceCurrentWithFutureLog),
    # see docs/STORAGE.md "Moving a partition between log dirs" (subject: the TopicPartition).
    ALTER_DIR_FUTURE_CREATED = "alter-dir-future-created"  # `-future` dir made, nothing copied yet
    ALTER_DIR_FUTURE_COPIED = "alter-dir-future-copied"  # closed segments copied, source still appending
    ALTER_DIR_FUTURE_RENAMED = "alter-dir-future-renamed"  # complete future renamed to the normal name
    ALTER_DIR_CURRENT_DELETED = "alter-dir-current-deleted"  # old dir renamed `-delete`, not yet removed
    # Broker start-up: the coordinators and the cleaner are about to be built (BrokerState.build_services; after
    # `ready` for `tidelog serve`, whose coordinator APIs answer COORDINATOR_LOAD_IN_PROGRESS until they are loaded).
    COORDINATORS_LOAD = "coordinators-load"


class FaultHooks(Protocol):
    def at(self, point: FaultPoint, subject: object = None) -> None:
        """Called when the code reaches `point`; `subject` says for what (a TopicPartition, a segment)."""


class NoFaults:
    """The production default: nothing happens."""

    def at(self, point: FaultPoint, subject: object = None) -> None:
        return None


NO_FAULTS: FaultHooks = NoFaults()
EXIT_CODE = 137  # what a SIGKILLed process reports


class ExitAt:
    """Exit the process at once (no cleanup, no flush) when `point` is reached."""

    def __init__(self, point: FaultPoint | str) -> None:
        self.point = str(point)  # any subsystem's named point (FaultPoint, the coordinators' StrEnums)

    def at(self, point: FaultPoint, subject: object = None) -> None:
        if str(point) == self.point:
            os._exit(EXIT_CODE)
