"""Producer id allocation for InitProducerId (Kafka's `ProducerIdManager`).

Kafka hands out ids in blocks reserved through the controller so they stay unique across restarts. We do the
same against a small file in the first log dir: before an id of a new block is handed out, the end of that
block is written durably (atomic replace + fsync). After a restart allocation resumes at the persisted end,
so at most one unused block is skipped and no id is ever handed out twice.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

STATE_FILE = "tidelog-producer-ids.json"
BLOCK_SIZE = 1000               # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_MAX_PRODUCER_ID = (1 << 63) - 1


class ProducerIdManager:
    def __init__(self, state_dir: str | Path, block_size: int = BLOCK_SIZE) -> None:
        self._path = Path(state_dir) / STATE_FILE
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = self._block_end = self._read_block_end()

    def _read_block_end(self) -> int:
        from tidelog.storage.checkpoints import StateFileError, read_json_state

        # Never reuse ids on a damaged file: refuse to start rather than hand out duplicates.
        value = read_json_state(self._path, lambda document: int(document["block_end"]))
        if value is None:
            return 0
        if value < 0:
            raise StateFileError(self._path, f"negative block_end {value}")
        return value

    def _persist(self, block_end: int) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "block_end": block_end}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        try:
            fd = os.open(self._path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass

    def generate_producer_id(self) -> int:
        """A producer id never handed out before by this broker (raises OSError if the block can't be saved)."""
        with self._lock:
            if self._next >= self._block_end:
                new_end = self._block_end + self._block_size
                if new_end > _MAX_PRODUCER_ID:
                    raise RuntimeError("producer ids exhausted")
                self._persist(new_end)
                self._next, self._block_end = self._block_end, new_end
                log.info("reserved producer id block [%d, %d)", self._next, self._block_end)
            pid = self._next
            self._next += 1
            return pid
