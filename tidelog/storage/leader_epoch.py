"""Leader-epoch history of a partition (Kafka's LeaderEpochFileCache), docs/STORAGE.md "Checkpoints".

Entries `(epoch, start_offset)` ascending in both columns, persisted to `leader-epoch-checkpoint`
whenever they change.
"""

from __future__ import annotations

import threading
from pathlib import Path

from tidelog.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    CheckpointError,
    LeaderEpochCheckpointFile,
)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    def __init__(self, partition_dir: Path) -> None:
        self.checkpoint = LeaderEpochCheckpointFile(Path(partition_dir) / LEADER_EPOCH_CHECKPOINT_FILE)
        self._lock = threading.RLock()
        try:
            self.epochs: list[tuple[int, int]] = self.checkpoint.read()
        except (CheckpointError, ValueError):
            self.epochs = []

    def _flush(self) -> None:
        self.checkpoint.write(self.epochs)

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1][0] if self.epochs else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return self.epochs[0] if self.epochs else None

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Record that `epoch` began at `start_offset`, if it is newer than the latest entry."""
        epochs = self.epochs
        if epochs and 0 <= epoch <= epochs[-1][0]:
            return False  # the common append, without the lock (truncation runs under the same Log lock)
        with self._lock:
            if epoch < 0 or (self.epochs and epoch <= self.epochs[-1][0]):
                return False
            # A new entry must not start before existing ones: drop entries it supersedes.
            self.epochs = [(e, o) for e, o in self.epochs if o < start_offset]
            self.epochs.append((epoch, start_offset))
            if flush:
                self._flush()
            return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= requested, start offset of the next epoch) or LEO for the latest epoch;
        (-1, -1) when unknown (Kafka's LeaderEpochFileCache.endOffsetFor)."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == self.latest_epoch:
                return requested_epoch, log_end_offset
            higher = next(((e, o) for e, o in self.epochs if e > requested_epoch), None)
            if higher is None:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = None
            for e, o in self.epochs:
                if e <= requested_epoch:
                    floor = (e, o)
            if floor is None:
                return requested_epoch, higher[1]
            return floor[0], higher[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (load, log truncation)."""
        with self._lock:
            kept = [(e, o) for e, o in self.epochs if o < end_offset]
            if kept != self.epochs:
                self.epochs = kept
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Entries starting at or before `start_offset` collapse into the latest of them, moved to it."""
        with self._lock:
            before = [(e, o) for e, o in self.epochs if o <= start_offset]
            if not before:
                return
            after = [(e, o) for e, o in self.epochs if o > start_offset]
            kept = [(before[-1][0], start_offset)] + after
            if kept != self.epochs:
                self.epochs = kept
                self._flush()

    def clear(self) -> None:
        with self._lock:
            self.epochs = []
            self._flush()

    def ensure_file(self) -> None:
        if not self.checkpoint.path.exists():
            self._flush()
