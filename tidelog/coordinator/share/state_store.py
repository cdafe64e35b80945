"""Durable share-partition state (what Kafka's share coordinator keeps in `__share_group_state`): per group and
partition the start offset, the first offset never delivered, the state epoch, and each in-flight offset's
delivery count. Locks do not survive a restart: an offset acquired when the broker stopped is available again
with the deliveries it had, as after a Kafka share-coordinator failover.

One JSON document, `<first log dir>/tidelog-share-state.json`, replaced atomically (fsync'd) after every change
that acknowledgements, releases or lock expiry make, before the request that made it is answered (Kafka answers
an acknowledgement once WriteShareGroupState is done). Partitions with nothing in flight are kept as three
numbers, and a partition holds at most group.share.partition.max.record.locks in-flight offsets, so the document
stays small.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tidelog.coordinator.share.share_partition import ACQUIRED, AVAILABLE, InFlight, SharePartition
from tidelog.metadata.files import SHARE_STATE

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
    def __init__(self, log_dir: str | Path) -> None:
        self.log_dir = Path(log_dir)
        self.path = SHARE_STATE.path(log_dir)

    def load(self) -> dict[str, tuple[int, list[SharePartition]]]:
        """group id -> (group epoch, its share-partitions) as last saved; raises StateFileError for a damaged
        file."""
        return SHARE_STATE.read(self.log_dir, _parse) or {}

    def save(self, groups: dict[str, tuple[int, Iterable[SharePartition]]]) -> None:
        """Every share group (its epoch and share-partitions), replacing the file atomically."""
        document = {"groups": {
            group_id: {"group_epoch": epoch,
                       "partitions": {_key(sp.topic_id, sp.partition): _state(sp) for sp in partitions}}
            for group_id, (epoch, partitions) in groups.items()}}
        SHARE_STATE.write(self.log_dir, document)


def _state(sp: SharePartition) -> dict[str, Any]:
    state: dict[str, Any] = {"start_offset": sp.start_offset, "end_offset": sp.end_offset,
                             "state_epoch": sp.state_epoch}
    if sp.records:
        # an acquisition is not written (as in Kafka): an acquired record comes back as it was before it
        state["in_flight"] = sorted([offset, rec.delivery_count - 1 if rec.state == ACQUIRED else rec.delivery_count]
                                    for offset, rec in sp.records.items())
    return state
