"""Producer id allocation for InitProducerId (Kafka's `ProducerIdManager`).

Kafka hands out ids in blocks reserved through the controller so they stay unique across restarts. We do the
same against a small file in the first log dir: before an id of a new block is handed out, the end of that
block is written durably (atomic replace + fsync). After a restart allocation resumes at the persisted end,
so at most one unused block is skipped and no id is ever handed out twice.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from tidelog.metadata.files import PRODUCER_IDS

log = logging.getLogger(__name__)

STATE_FILE = PRODUCER_IDS.name
BLOCK_SIZE = 1000               # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_MAX_PRODUCER_ID = (1 << 63) - 1


def _block_end(document: dict[str, Any]) -> int:
    value = int(document["block_end"])
    if value < 0:
        raise ValueError(f"negative block_end {value}")
    return value


class ProducerIdManager:
    def __init__(self, state_dir: str | Path, block_size: int = BLOCK_SIZE) -> None:
        self._dir = Path(state_dir)
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = self._block_end = self._read_block_end()

    def _read_block_end(self) -> int:
        # Never reuse ids on a damaged file: refuse to start rather than hand out duplicates.
        return PRODUCER_IDS.read(self._dir, _block_end) or 0

    def _persist(self, block_end: int) -> None:
        PRODUCER_IDS.write(self._dir, {"block_end": block_end})

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
