"""Durable share-partition state (what Kafka's share coordinator keeps in `__share_group_state`): per group and
partition the start offset, the first offset never delivered, the state epoch, and each in-flight offset's
delivery count. Locks do not survive a restart: an offset acquired when the broker stopped is available again
with the deliveries it had, as after a Kafka share-coordinator failover.

One JSON document, `<first log dir>/tidelog-share-state.json`, replaced atomically (fsync'd) off the event loop
after the changes that acknowledgements, releases, lock expiry and membership make (changes close together share
one write, metadata.writer); the request that made a change is answered once it is on disk (Kafka answers an
acknowledgement once WriteShareGroupState is done). Partitions with nothing in flight are kept as three
numbers, and a partition holds at most group.share.partition.max.record.locks in-flight offsets, so the document
stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tidelog.coordinator.share.share_partition import ACQUIRED, AVAILABLE, InFlight, SharePartition
from tidelog.metadata.files import SHARE_STATE
from tidelog.metadata.writer import CoalescingWriter

Groups = Mapping[str, tuple[int, Iterable[SharePartition]]]  # group id -> (group epoch, its share-partitions)

FILE_NAME = SHARE_STATE.name


def _key(topic_id: bytes, partition: int) -> str:
    return f"{topic_id.hex()}:{partition}"


def _parse(document: Any) -> dict[str, tuple[int, list[SharePartition]]]:
    groups: dict[str, tuple[int, list[SharePartition]]] = {}
    for group_id, group in document["groups"].items():
        out: list[SharePartition] = []
        groups[str(group_id)] = (int(group["group_epoch"]), out)
        for key, state in group["partitions"].items():
            topic_hex, _, partition = str(key).partition(":")
            records = {int(offset): InFlight(AVAILABLE, int(count)) for offset, count in state.get("in_flight", [])}
            sp = SharePartition(str(group_id), bytes.fromhex(topic_hex), int(partition), int(state["start_offset"]),
                                int(state["end_offset"]), records, int(state.get("state_epoch", 0)))
            sp.mark_persisted()  # as read back: the summary DescribeShareGroupOffsets reports
            out.append(sp)
    return groups


class ShareStateStore:
    """The share-state file, written by a CoalescingWriter from the coordinator's live state."""

    def __init__(self, log_dir: str | Path, fault_hooks: Any = None) -> None:
        self.log_dir = Path(log_dir)
        self.path = SHARE_STATE.path(log_dir)
        self._groups: Callable[[], Groups] = dict
        self._taken: list[tuple[SharePartition, int, int]] = []  # the summaries in the last snapshot
        self.writer = CoalescingWriter(SHARE_STATE, self.log_dir, self._document, fault_hooks, self._written)

    def load(self) -> dict[str, tuple[int, list[SharePartition]]]:
        """group id -> (group epoch, its share-partitions) as last saved; raises StateFileError for a damaged
        file."""
        return SHARE_STATE.read(self.log_dir, _parse) or {}

    def save(self, groups: Callable[[], Groups]) -> None:
        """The state `groups()` gives changed: written soon, off the loop, from a snapshot taken then
        (`durable()` waits for it)."""
        self._groups = groups
        self.writer.changed()

    async def durable(self) -> None:
        """Every change saved so far is on disk (the exception of the write that was to carry it, if it failed:
        the writer retries it)."""
        await self.writer.durable()

    def flush(self) -> None:
        """Broker shutdown: what is not written yet, now."""
        self.writer.flush()

    def _document(self) -> dict[str, Any]:
        taken: list[tuple[SharePartition, int, int]] = []
        groups: dict[str, Any] = {}
        for group_id, (epoch, partitions) in self._groups().items():
            states = {}
            for sp in partitions:
                states[_key(sp.topic_id, sp.partition)] = _state(sp)
                taken.append((sp, sp.start_offset, sp.delivery_complete_count()))
            groups[group_id] = {"group_epoch": epoch, "partitions": states}
        self._taken = taken
        return {"groups": groups}

    def _written(self) -> None:
        """The last snapshot is on disk: its start offsets and counts are what DescribeShareGroupOffsets reports."""
        for sp, start, done in self._taken:
            sp.persisted_start, sp.persisted_done = start, done


def _state(sp: SharePartition) -> dict[str, Any]:
    state: dict[str, Any] = {"start_offset": sp.start_offset, "end_offset": sp.end_offset,
                             "state_epoch": sp.state_epoch}
    if sp.records:
        # an acquisition is not written (as in Kafka): an acquired record comes back as it was before it
        state["in_flight"] = sorted([offset, rec.delivery_count - 1 if rec.state == ACQUIRED else rec.delivery_count]
                                    for offset, rec in sp.records.items())
    return state
