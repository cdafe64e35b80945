"""Kafka's `GroupMetadataManager`: the group cache, writing groups and offsets to `__consumer_offsets`,
replaying it at startup, and offset retention (tombstones for expired offsets and dead groups)."""

from __future__ import annotations

import logging

from tidelog.clock import Clock
from tidelog.coordinator.group import records as rec
from tidelog.coordinator.group.classic.group import GroupMetadata, GroupState, OffsetAndMetadata
from tidelog.coordinator.group.classic.member import MemberMetadata
from tidelog.coordinator.group.config import GroupCoordinatorConfig
from tidelog.coordinator.group.store import OffsetsStore, partition_for
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


def _store_error(code: ErrorCode, for_commit: bool) -> ErrorCode:
    """How Kafka maps append failures to group/commit errors (GroupMetadataManager.storeGroup/storeOffsets)."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if for_commit else ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class GroupMetadataManager:
    def __init__(self, clock: Clock, config: GroupCoordinatorConfig, store: OffsetsStore | None) -> None:
        self.clock = clock
        self.config = config
        self.store = store
        self.groups: dict[str, GroupMetadata] = {}

    # ------------------------------------------------------------------------------------------- cache
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def remove_group(self, group_id: str) -> None:
        self.groups.pop(group_id, None)

    def partition_for(self, group_id: str) -> int:
        n = self.store.num_partitions if self.store is not None else self.config.offsets_topic_num_partitions
        return partition_for(group_id, n)

    # ------------------------------------------------------------------------------------------- writes
    def _append(self, group_id: str, records: list[Record], for_commit: bool) -> ErrorCode:
        if self.store is None or not records:
            return ErrorCode.NONE
        try:
            self.store.append(self.partition_for(group_id), records)
        except KafkaError as e:
            log.warning("writing %d record(s) of group %s to __consumer_offsets failed: %s",
                        len(records), group_id, e.code.name)
            return _store_error(e.code, for_commit)
        except OSError as e:
            log.warning("writing group %s to __consumer_offsets failed: %s", group_id, e)
            return ErrorCode.KAFKA_STORAGE_ERROR if for_commit else ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def group_record(self, group: GroupMetadata, assignments: dict[str, bytes] | None = None) -> Record:
        protocol = group.protocol_name
        members = []
        if group.state is not GroupState.EMPTY and group.state is not GroupState.DEAD:
            for m in group.members.values():
                assignment = assignments.get(m.member_id, b"") if assignments is not None else m.assignment
                members.append(rec.MemberValue(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                    m.session_timeout_ms, m.metadata(protocol) if protocol else b"", assignment))
        value = rec.GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=protocol,
            leader=group.leader_id, current_state_timestamp=group.state_timestamp_ms, members=members)
        return (rec.encode_group_metadata_key(rec.GroupMetadataKey(group.group_id)),
                rec.encode_group_metadata_value(value))

    def store_group(self, group: GroupMetadata, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        return self._append(group.group_id, [self.group_record(group, assignments)], for_commit=False)

    @staticmethod
    def offset_records(group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> list[Record]:
        """One OffsetCommit record per partition (the plain and the transactional commit write the same)."""
        return [(rec.encode_offset_commit_key(rec.OffsetCommitKey(group_id, tp.topic, tp.partition)),
                 rec.encode_offset_commit_value(rec.OffsetCommitValue(
                     om.offset, om.leader_epoch, om.metadata, om.commit_timestamp, om.expire_timestamp)))
                for tp, om in offsets.items()]

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """Append the commit records; on success the offsets become visible in the cache."""
        records = self.offset_records(group.group_id, offsets)
        error = self._append(group.group_id, records, for_commit=True)
        if error == ErrorCode.NONE:
            group.offsets.update(offsets)
        return error

    def store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                          offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """TxnOffsetCommit: the records go to `__consumer_offsets` in a transactional batch of the producer;
        the offsets stay pending in the group until the marker that ends the transaction (Kafka's
        GroupMetadataManager.storeOffsets with a producer id + GroupMetadata.prepareTxnOffsetCommit)."""
        records = self.offset_records(group.group_id, offsets)
        if self.store is not None and records:
            try:
                self.store.append(self.partition_for(group.group_id), records, producer_id, producer_epoch)
            except KafkaError as e:
                log.warning("writing txn offsets of group %s failed: %s", group.group_id, e.code.name)
                return _store_error(e.code, for_commit=True)
            except OSError as e:
                log.warning("writing txn offsets of group %s failed: %s", group.group_id, e)
                return ErrorCode.KAFKA_STORAGE_ERROR
        group.prepare_txn_offset_commit(producer_id, offsets)
        return ErrorCode.NONE

    def complete_txn_offsets(self, partition: int, producer_id: int, commit: bool) -> int:
        """The transaction of `producer_id` ended with a marker on `__consumer_offsets` partition `partition`
        (Kafka's GroupCoordinator.onTransactionCompleted -> scheduleHandleTxnCompletion)."""
        settled = 0
        for group in self.groups.values():
            if producer_id in group.pending_txn_offsets and self.partition_for(group.group_id) == partition:
                settled += group.complete_pending_txn_offset_commit(producer_id, commit)
        return settled

    def offset_tombstones(self, group_id: str, partitions: list[TopicPartition]) -> list[Record]:
        return [(rec.encode_offset_commit_key(rec.OffsetCommitKey(group_id, tp.topic, tp.partition)), None)
                for tp in partitions]

    def delete_offsets(self, group: GroupMetadata, partitions: list[TopicPartition]) -> ErrorCode:
        present = [tp for tp in partitions if tp in group.offsets]
        error = self._append(group.group_id, self.offset_tombstones(group.group_id, present), for_commit=False)
        if error == ErrorCode.NONE:
            for tp in present:
                del group.offsets[tp]
        return error

    def delete_group(self, group: GroupMetadata) -> ErrorCode:
        """Tombstones for every offset and for the group record; the group goes Dead and leaves the cache."""
        records = self.offset_tombstones(group.group_id, list(group.offsets))
        records.append((rec.encode_group_metadata_key(rec.GroupMetadataKey(group.group_id)), None))
        error = self._append(group.group_id, records, for_commit=False)
        if error == ErrorCode.NONE:
            group.offsets.clear()
            group.transition_to(GroupState.DEAD, self.clock.milliseconds())
            self.remove_group(group.group_id)
        return error

    # ---------------------------------------------------------------------------------------- retention
    def cleanup_expired_offsets(self) -> int:
        """Kafka's GroupMetadata.removeExpiredOffsets + cleanupGroupMetadata; returns offsets removed."""
        now = self.clock.milliseconds()
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            protocol_type = group.protocol_type or None
            subscribed: set[str] = set()
            if protocol_type is not None and group.is_(GroupState.EMPTY):
                def base(om: OffsetAndMetadata, g: GroupMetadata = group) -> int:
                    return g.state_timestamp_ms if g.state_timestamp_ms >= 0 else om.commit_timestamp
            elif protocol_type == "consumer" and group.is_(GroupState.STABLE):
                topics = group.subscribed_topics()
                if topics is None:
                    continue
                subscribed = topics
                base = _commit_timestamp
            elif protocol_type is None:
                base = _commit_timestamp
            else:
                continue
            expired = [
                tp for tp, om in group.offsets.items()
                if tp.topic not in subscribed and (
                    now >= om.expire_timestamp if om.expire_timestamp >= 0 else now - base(om) >= retention)
            ]
            if expired and self.delete_offsets(group, expired) == ErrorCode.NONE:
                removed += len(expired)
                log.info("expired %d offset(s) of group %s", len(expired), group.group_id)
            if (group.is_(GroupState.EMPTY) and not group.offsets and not group.members
                    and not group.pending_members and not group.pending_txn_offsets):
                self.delete_group(group)
        return removed

    # --------------------------------------------------------------------------------------------- load
    def load(self) -> None:
        """Replay `__consumer_offsets` into the cache (Kafka's loadGroupsAndOffsets)."""
        if self.store is None:
            return
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, rec.GroupMetadataValue | None] = {}
        # TxnOffsetCommit records waiting for their marker: (partition, producer id) -> group -> offsets
        pending: dict[tuple[int, int], dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}
        count = 0
        for partition, key_bytes, value_bytes, producer_id, control in self.store.load():
            if control is not None:
                # Kafka's loadGroupsAndOffsets: a COMMIT marker applies the producer's pending offsets in
                # this partition in order, an ABORT drops them
                for group_id, txn_offsets in pending.pop((partition, producer_id), {}).items():
                    if control:
                        offsets.setdefault(group_id, {}).update(txn_offsets)
                continue
            try:
                key = rec.decode_key(key_bytes)
                if isinstance(key, rec.OffsetCommitKey):
                    tp = TopicPartition(key.topic, key.partition)
                    if producer_id >= 0:
                        group_offsets = pending.setdefault((partition, producer_id), {}).setdefault(key.group, {})
                    else:
                        group_offsets = offsets.setdefault(key.group, {})
                    if value_bytes is None:
                        group_offsets.pop(tp, None)
                    else:
                        v = rec.decode_offset_commit_value(value_bytes)
                        group_offsets[tp] = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata,
                                                              v.commit_timestamp, v.expire_timestamp)
                elif isinstance(key, rec.GroupMetadataKey):
                    metadata[key.group] = (None if value_bytes is None
                                           else rec.decode_group_metadata_value(value_bytes))
                count += 1
            except rec.RecordFormatError as e:
                log.warning("skipping undecodable __consumer_offsets record: %s", e)
        now_mono = self.clock.monotonic_ms()
        open_txns: dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]] = {}
        for (_, producer_id), by_group in pending.items():
            for group_id, txn_offsets in by_group.items():
                open_txns.setdefault(group_id, {})[producer_id] = txn_offsets
        for group_id in set(offsets) | set(metadata) | set(open_txns):
            value = metadata.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if value is None and not group_offsets and group_id not in open_txns:
                continue
            group = GroupMetadata(group_id)
            if value is not None:
                group.protocol_type = value.protocol_type or None
                group.generation_id = value.generation
                group.protocol_name = value.protocol
                group.state_timestamp_ms = value.current_state_timestamp
                for mv in value.members:
                    group.add(MemberMetadata(
                        mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.rebalance_timeout,
                        mv.session_timeout, value.protocol_type,
                        [(value.protocol or "", mv.subscription)], mv.assignment, last_heartbeat_ms=now_mono))
                group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
                # Kafka loads a group with members as Stable; their session timers start now.
                group.state = GroupState.STABLE if group.members else GroupState.EMPTY
            group.offsets = group_offsets
            # transactions still open at the end of the log: their marker comes from the txn coordinator
            group.pending_txn_offsets = open_txns.get(group_id, {})
            self.groups[group_id] = group
        log.info("loaded %d group(s) from %d __consumer_offsets record(s)", len(self.groups), count)


def _commit_timestamp(om: OffsetAndMetadata, g: GroupMetadata | None = None) -> int:
    return om.commit_timestamp
