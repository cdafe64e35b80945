"""KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe and their records, as Kafka's
GroupMetadataManager does them for `group.protocol=consumer`.

Every change is expressed as `__consumer_offsets` records (consumer/records.py) that are appended to the
group's partition and replayed into memory by the same `replay()` the loader uses, so what survives a
restart is exactly what was served. Committed offsets of a consumer group live where the classic
coordinator keeps them (an offsets-only GroupMetadata of the same id), so OffsetFetch, OffsetDelete and
retention work unchanged; OffsetCommit is validated here against the member epoch first.

Classic and consumer groups sharing an id follow Kafka: a heartbeat with epoch 0 turns an empty classic
group into a consumer group (its classic record is tombstoned, offsets stay), a classic JoinGroup turns an
empty consumer group into a classic one, and a classic consumer joining a live consumer group becomes one of
its members (classic_members.py; another protocol type is INCONSISTENT_GROUP_PROTOCOL).
A live classic group whose members use the consumer embedded protocol is upgraded when a consumer-protocol member
joins; a consumer group whose last consumer-protocol member leaves while classic members remain is downgraded.

Deadlines (session timeout, rebalance timeout of a member that must revoke) are operations on the group
coordinator's keyed DeadlineTimer (tidelog.coordinator.timer), one key per member and deadline as Kafka's
consumerGroupSessionTimeoutKey / consumerGroupRebalanceTimeoutKey, on the injected Clock; `check_expirations()`
runs the due ones.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.clock import Clock
from tidelog.coordinator.group import records as classic_records
from tidelog.coordinator.group.classic.group import GroupMetadata, GroupState, OffsetAndMetadata
from tidelog.coordinator.group.classic.member import JoinResult, SyncResult
from tidelog.coordinator.group.consumer import records as cr
from tidelog.coordinator.group.consumer.assignors import (
    Assignment,
    MemberSubscription,
    PartitionAssignor,
    build_assignors,
)
from tidelog.coordinator.group.consumer.classic_members import ClassicMembers, downgrade, upgrade_records
from tidelog.coordinator.group.consumer.errors import HeartbeatError
from tidelog.coordinator.group.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    assignment_equal,
    is_subset,
    reconcile,
)
from tidelog.coordinator.group.offset_validation import txn_offset_commit_error
from tidelog.coordinator.timer import DeadlineTimer
from tidelog.protocol.errors import ErrorCode
from tidelog.storage import TopicPartition

if TYPE_CHECKING:
    from tidelog.coordinator.group.group_config import GroupConfigManager

log = logging.getLogger(__name__)

E = ErrorCode
INVALID_REGULAR_EXPRESSION = 128
Record = tuple[bytes, bytes | None]
# A fence that could not be written is tried again this much later (the previous rescan's timer floor).
_FENCE_RETRY_MS = 10


@dataclass(slots=True)
class ConsumerGroupConfig:
    """group.consumer.* and group.coordinator.rebalance.protocols."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    rebalance_protocols: tuple[str, ...] = ("classic", "consumer")
    max_size: int = 2**31 - 1

    @classmethod
    def from_broker_config(cls, config: Any) -> ConsumerGroupConfig:
        getter = getattr(config, "get", None)
        if not callable(getter):
            return cls()

        def value(name: str, default: Any) -> Any:
            try:
                v = getter(name)
            except (KeyError, AttributeError):
                return default
            return default if v is None else v

        return cls(int(value("group.consumer.session.timeout.ms", 45_000)),
                   int(value("group.consumer.heartbeat.interval.ms", 5_000)),
                   tuple(value("group.consumer.assignors", ["uniform", "range"])),
                   tuple(value("group.coordinator.rebalance.protocols", ["classic", "consumer"])),
                   int(value("group.consumer.max.size", 2**31 - 1)))


@dataclass(slots=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None  # None: not sent


def _assignment_of(topic_partitions: Iterable[Any] | None) -> Assignment | None:
    if topic_partitions is None:
        return None
    out: Assignment = {}
    for tp in topic_partitions:
        raw = tp.topic_id  # kafka-python decodes the all-zero uuid (no topic id) as None
        tid = raw if isinstance(raw, uuid.UUID) else uuid.UUID(bytes=bytes(raw or bytes(16)))
        out.setdefault(tid, set()).update(tp.partitions or [])
    return out


class ConsumerGroupCoordinator:
    def __init__(self, classic: Any, topics: Any, clock: Clock, config: ConsumerGroupConfig | None = None,
                 group_configs: Callable[[], GroupConfigManager] | None = None) -> None:
        self.classic = classic  # the classic GroupCoordinator: offsets and the __consumer_offsets store
        self.topics = topics
        self.clock = clock
        self.config = config or ConsumerGroupConfig()
        self._group_configs = group_configs  # each group's own session timeout / heartbeat interval
        self.assignors: dict[str, PartitionAssignor] = build_assignors(list(self.config.assignors))
        self.groups: dict[str, ConsumerGroup] = {}
        # the group coordinator's timer (its startup() starts it); a coordinator of its own starts its own
        shared = getattr(classic, "timer", None)
        self.timer: DeadlineTimer = shared if isinstance(shared, DeadlineTimer) else \
            DeadlineTimer(clock.monotonic_ms, "consumer group coordinator")
        if shared is not self.timer:
            self.timer.start()
        self.classic_members = ClassicMembers(self)

    @property
    def enabled(self) -> bool:
        return "consumer" in self.config.rebalance_protocols

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    # ------------------------------------------------------------------------------------------ records
    def replay(self, key: cr.ConsumerGroupKey, value: bytes | None) -> None:
        """Apply one record to memory (Kafka's GroupMetadataManager.replay)."""
        gid = key.group_id
        group = self.groups.get(gid)
        if value is None:  # tombstone
            if group is None:
                return
            if key.record_type == cr.GROUP_METADATA:
                del self.groups[gid]
            elif key.record_type == cr.PARTITION_METADATA:
                group.subscription_metadata = {}
            elif key.record_type == cr.TARGET_ASSIGNMENT_METADATA:
                group.assignment_epoch = 0
            elif key.record_type == cr.TARGET_ASSIGNMENT_MEMBER:
                group.target.pop(key.member_id or "", None)
            elif key.record_type == cr.MEMBER_METADATA:
                group.members.pop(key.member_id or "", None)
            elif key.record_type == cr.REGULAR_EXPRESSION:
                group.resolved_regexes.pop(key.member_id or "", None)
            elif key.record_type == cr.CURRENT_MEMBER_ASSIGNMENT:
                member = group.members.get(key.member_id or "")
                if member is not None:
                    member.assigned, member.pending_revocation = {}, {}
                    member.member_epoch, member.state = 0, MemberState.STABLE
            return
        if group is None:
            group = self.groups[gid] = ConsumerGroup(gid)
        if key.record_type == cr.GROUP_METADATA:
            group.group_epoch = cr.decode_epoch(value)
        elif key.record_type == cr.PARTITION_METADATA:
            group.subscription_metadata = {t.name: t for t in cr.decode_partition_metadata(value)}
        elif key.record_type == cr.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = cr.decode_epoch(value)
        elif key.record_type == cr.TARGET_ASSIGNMENT_MEMBER:
            group.target[key.member_id or ""] = cr.decode_target_member(value)
        elif key.record_type == cr.MEMBER_METADATA:
            v = cr.decode_member_metadata(value)
            member = group.members.get(key.member_id or "")
            if member is None:
                member = group.members[key.member_id or ""] = ConsumerGroupMember(key.member_id or "")
            member.instance_id, member.rack_id = v.instance_id, v.rack_id
            member.client_id, member.client_host = v.client_id, v.client_host
            member.subscribed_topic_names = list(v.subscribed_topic_names)
            member.subscribed_topic_regex = v.subscribed_topic_regex
            member.rebalance_timeout_ms, member.server_assignor = v.rebalance_timeout_ms, v.server_assignor
            member.classic = None if v.classic is None else ClassicMemberMetadata(v.classic[0], list(v.classic[1]))
        elif key.record_type == cr.REGULAR_EXPRESSION:
            group.resolved_regexes[key.member_id or ""] = cr.decode_regular_expression(value).topics
        elif key.record_type == cr.CURRENT_MEMBER_ASSIGNMENT:
            a = cr.decode_current_assignment(value)
            member = group.members.get(key.member_id or "")
            if member is None:
                member = group.members[key.member_id or ""] = ConsumerGroupMember(key.member_id or "")
            member.member_epoch, member.previous_member_epoch = a.member_epoch, a.previous_member_epoch
            member.state = MemberState(a.state) if a.state in MemberState._value2member_map_ else MemberState.UNKNOWN
            member.assigned, member.pending_revocation = a.assigned, a.pending_revocation

    def load(self) -> None:
        """Replay the consumer-group records of `__consumer_offsets` (after the classic load)."""
        store = self.classic.manager.store
        if store is None:
            return
        count = 0
        for stored in store.load():
            if stored.control is not None or not stored.key:
                continue  # a transaction marker (TxnOffsetCommit), not a consumer-group record
            try:
                key = cr.decode_key(stored.key)
                value_bytes = stored.value
                if key is None:
                    continue
                self.replay(key, value_bytes)
                count += 1
            except (cr.ConsumerRecordError, ValueError) as e:
                log.warning("skipping undecodable consumer group record: %s", e)
        now = self._now()
        for group in self.groups.values():
            for member in group.members.values():
                member.session_deadline_ms = now + self._session_timeout(group.group_id, member)
                self._schedule_member(group.group_id, member)
        if count:
            log.info("loaded %d consumer group(s) from %d record(s)", len(self.groups), count)

    def _write(self, group_id: str, records: list[tuple[cr.ConsumerGroupKey, bytes | None]]) -> int:
        """Append the records to the group's partition, then replay them; the error code of the write."""
        if not records:
            return E.NONE
        encoded: list[Record] = [(cr.encode_key(k), v) for k, v in records]
        error = self.classic.manager._append(group_id, encoded, for_commit=False)
        if error != E.NONE:
            return int(error)
        for key, value in records:
            self.replay(key, value)
        return E.NONE

    # ----------------------------------------------------------------------------- classic interaction
    def _classic_group(self, group_id: str) -> GroupMetadata | None:
        group: GroupMetadata | None = self.classic.manager.get_group(group_id)
        return group

    def _offsets_holder(self, group_id: str) -> GroupMetadata:
        holder = self._classic_group(group_id)
        if holder is None:
            holder = self.classic.manager.add_group(GroupMetadata(group_id, state_timestamp_ms=self.clock.milliseconds()))
        return holder

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def before_classic_join(self, group_id: str, protocol_type: str) -> int:
        """GroupMetadataManager.getOrMaybeCreateClassicGroup for a group that is a consumer group: an empty
        one becomes classic, a live one is refused."""
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE
        if not group.is_empty():
            if protocol_type != "consumer":
                return E.INCONSISTENT_GROUP_PROTOCOL
            return E.GROUP_ID_NOT_FOUND
        error = self._write(group_id, self._group_tombstones(group))
        if error == E.NONE:
            log.info("empty consumer group %s converted to a classic group", group_id)
        return error if error == E.NONE else E.COORDINATOR_NOT_AVAILABLE

    def _maybe_take_over_classic(self, group_id: str) -> None:
        """An empty classic group becomes a consumer group (maybeDeleteEmptyClassicGroup); a live one whose
        members speak the consumer embedded protocol is upgraded with its members (convertToConsumerGroup)."""
        classic = self._classic_group(group_id)
        if classic is None or group_id in self.groups:
            return
        if classic.members or classic.pending_members:
            self._upgrade(classic)
            return
        if classic.protocol_type is not None:
            tombstone = (classic_records.encode_group_metadata_key(classic_records.GroupMetadataKey(group_id)), None)
            error = self.classic.manager._append(group_id, [tombstone], for_commit=False)
            if error != E.NONE:
                raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
            classic.protocol_type = None
            classic.protocol_name = None
            classic.generation_id = 0
            log.info("empty classic group %s converted to a consumer group", group_id)

    def _upgrade(self, classic: GroupMetadata) -> None:
        records = upgrade_records(self, classic)
        if records is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {classic.group_id} is not a consumer group.")
        gid = classic.group_id
        tombstone = (classic_records.encode_group_metadata_key(classic_records.GroupMetadataKey(gid)), None)
        if self.classic.manager._append(gid, [tombstone], for_commit=False) != E.NONE:
            raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
        self.groups[gid] = ConsumerGroup(gid)
        if self._write(gid, records) != E.NONE:
            self.groups.pop(gid, None)
            raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
        # parked classic calls learn of the change and rejoin (Kafka completes them with REBALANCE_IN_PROGRESS)
        for m in classic.members.values():
            m.complete_join(JoinResult(E.REBALANCE_IN_PROGRESS, m.member_id))
            m.complete_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        classic.members.clear()
        classic.static_members.clear()
        classic.pending_members.clear()
        classic.protocol_type = classic.protocol_name = classic.leader_id = None
        classic.generation_id = 0
        classic.state = GroupState.EMPTY
        now = self._now()
        for member in self.groups[gid].members.values():
            member.session_deadline_ms = now + self._session_timeout(gid, member)
            self._schedule_member(gid, member)
        log.info("classic group %s upgraded to a consumer group with %d member(s)", gid, len(self.groups[gid].members))

    # --------------------------------------------------------------------------------------- heartbeat
    def validate(self, request: Any) -> None:
        if not request.group_id:
            raise HeartbeatError(E.INVALID_REQUEST, "GroupId can't be empty.")
        if request.instance_id is not None and request.instance_id == "":
            raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if request.rack_id is not None and request.rack_id == "":
            raise HeartbeatError(E.INVALID_REQUEST, "RackId can't be empty.")
        regex = getattr(request, "subscribed_topic_regex", None)
        if regex:  # "" (librdkafka's v1 default) means no regex
            try:
                re.compile(regex)
            except re.error as e:
                raise HeartbeatError(INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a "
                                     f"valid regular expression: {e}.") from None
        epoch = request.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise HeartbeatError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise HeartbeatError(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and regex is None:
                raise HeartbeatError(E.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must "
                                     "be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
            if request.instance_id is None:
                raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise HeartbeatError(E.INVALID_REQUEST, "MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(self.assignors)}.")

    def heartbeat(self, request: Any, client_id: str, client_host: str) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat; raises HeartbeatError with Kafka's code."""
        self.validate(request)
        epoch = request.member_epoch
        if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(request.group_id, request.member_id, request.instance_id, epoch)
        return self._heartbeat(request, client_id, client_host)

    def _check_epoch(self, member: ConsumerGroupMember, received: int, owned: Assignment | None) -> None:
        """throwIfConsumerGroupMemberEpochIsInvalid (a lost response is tolerated at the previous epoch)."""
        if received > member.member_epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch "
                                 f"({received}) than the one known by the group coordinator ({member.member_epoch}).")
        if received < member.member_epoch and (
                received != member.previous_member_epoch or owned is None or not is_subset(owned, member.assigned)):
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator ({member.member_epoch}).")

    def heartbeat_member(self, request: Any, client_id: str, client_host: str,
                         classic: ClassicMemberMetadata) -> HeartbeatResult:
        """A classic member's JoinGroup, run as a heartbeat (no epoch check; ClassicMembers.join)."""
        return self._heartbeat(request, client_id, client_host, classic)

    def _session_timeout(self, group_id: str, member: ConsumerGroupMember) -> int:
        """A classic member's own; else the group's consumer.session.timeout.ms (GroupMetadataManager
        .consumerGroupSessionTimeoutMs: the group config over the broker's)."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        default = self.config.session_timeout_ms
        return default if self._group_configs is None else \
            self._group_configs().consumer_session_timeout_ms(group_id, default)

    def _heartbeat_interval(self, group_id: str) -> int:
        default = self.config.heartbeat_interval_ms
        return default if self._group_configs is None else \
            self._group_configs().consumer_heartbeat_interval_ms(group_id, default)

    def touch_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        member.session_deadline_ms = self._now() + self._session_timeout(group_id, member)
        self._schedule_member(group_id, member)

    def _heartbeat(self, request: Any, client_id: str, client_host: str,
                   classic: ClassicMemberMetadata | None = None) -> HeartbeatResult:
        group_id, epoch = request.group_id, request.member_epoch
        owned = _assignment_of(request.topic_partitions)
        group = self.groups.get(group_id)
        if group is None:
            if epoch != 0:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            self._maybe_take_over_classic(group_id)
            group = self.groups.get(group_id) or ConsumerGroup(group_id)  # the upgraded group, or a new one
        member_id = request.member_id or str(uuid.uuid4())
        records: list[tuple[cr.ConsumerGroupKey, bytes | None]] = []
        member = group.members.get(member_id)
        replaced: ConsumerGroupMember | None = None
        if request.instance_id is not None:
            existing = group.static_member(request.instance_id)
            if epoch == 0 and existing is not None and existing.member_id != member_id:
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise HeartbeatError(E.UNRELEASED_INSTANCE_ID, f"Static member {existing.member_id} with "
                                         f"instance id {request.instance_id} is not released.")
                replaced = existing  # the new incarnation takes over its assignment
            elif epoch != 0:
                if existing is None:
                    raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Instance id {request.instance_id} belongs to "
                                         f"another member.")
        if member is None:
            if epoch != 0 and classic is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                     f"capacity of {self.config.max_size} members.")
            member = ConsumerGroupMember(member_id)
            if replaced is not None:
                member = replaced.copy()
                member.member_id = member_id
                member.member_epoch = replaced.previous_member_epoch if replaced.previous_member_epoch > 0 else 0
                records.extend(self._member_tombstones(group_id, replaced.member_id))
                records.append((cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                                cr.encode_target_member(group.target.get(replaced.member_id, {}))))
        elif classic is None:
            self._check_epoch(member, epoch, owned)
        updated = member.copy()
        updated.classic = classic
        if request.instance_id is not None:
            updated.instance_id = request.instance_id
        if request.rack_id is not None:
            updated.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            updated.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None:
            updated.subscribed_topic_names = sorted(set(request.subscribed_topic_names))
        regex = getattr(request, "subscribed_topic_regex", None)
        if regex is not None:
            updated.subscribed_topic_regex = regex or None
        updated.client_id, updated.client_host = client_id, client_host
        is_new = member_id not in group.members
        bump = is_new or (updated.subscribed_topic_names != member.subscribed_topic_names
                          or updated.subscribed_topic_regex != member.subscribed_topic_regex
                          or updated.server_assignor != member.server_assignor)
        if is_new or not updated.same_metadata(member):
            records.append((cr.ConsumerGroupKey(cr.MEMBER_METADATA, group_id, member_id),
                            cr.encode_member_metadata(cr.MemberMetadataValue(
                                updated.instance_id, updated.rack_id, updated.client_id, updated.client_host,
                                updated.subscribed_topic_names, updated.subscribed_topic_regex,
                                updated.rebalance_timeout_ms, updated.server_assignor,
                                None if classic is None else (classic.session_timeout_ms,
                                                              classic.supported_protocols)))))
        # subscription metadata over every member with this one's new subscription (regexes resolved now)
        others = [m for m in group.members.values() if m.member_id != member_id]
        resolved, regex_records = self._resolve_regexes(group, [*others, updated])
        bump = bump or any(v is not None for _, v in regex_records)
        records.extend(regex_records)
        names = {t for m in [*others, updated] for t in group.member_topics(m, resolved)}
        metadata = self._subscription_metadata(names)
        if metadata != group.subscription_metadata:
            bump = True
            records.append((cr.ConsumerGroupKey(cr.PARTITION_METADATA, group_id),
                            cr.encode_partition_metadata(list(metadata.values()))))
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append((cr.ConsumerGroupKey(cr.GROUP_METADATA, group_id), cr.encode_epoch(group_epoch)))
        if group_id not in self.groups:
            self.groups[group_id] = group  # replay below fills it
        error = self._write(group_id, records)
        if error != E.NONE:
            if group.is_empty() and group.group_epoch == 0:
                self.groups.pop(group_id, None)
            raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE if error != E.NOT_COORDINATOR else error)
        self._offsets_holder(group_id)
        group = self.groups[group_id]
        records = []
        if group.group_epoch > group.assignment_epoch:
            records.extend(self._target_assignment_records(group))
        error = self._write(group_id, records)
        if error != E.NONE:
            raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
        current = group.members[member_id].copy()  # replay updates the member in place
        epochs = group.partition_epochs(exclude=member_id)
        next_member = reconcile(current, group.assignment_epoch, group.target.get(member_id, {}), owned,
                                lambda t, p: epochs.get((t, p), -1))
        if not next_member.same_assignment(current):
            error = self._write(group_id, [self._current_assignment_record(group_id, next_member)])
            if error != E.NONE:
                raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
        final = group.members[member_id]
        now = self._now()
        final.session_deadline_ms = now + self._session_timeout(group_id, final)
        if final.state == MemberState.UNREVOKED_PARTITIONS:
            if current.state != MemberState.UNREVOKED_PARTITIONS or final.rebalance_deadline_ms < 0:
                final.rebalance_deadline_ms = now + max(0, final.rebalance_timeout_ms)
        else:
            final.rebalance_deadline_ms = -1
        self._schedule_member(group_id, final)
        full = epoch == 0 or (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                              and owned is not None)
        send = full or not assignment_equal(current.assigned_partitions(), final.assigned_partitions()) or is_new
        return HeartbeatResult(member_id, final.member_epoch, self._heartbeat_interval(group_id),
                               final.assigned_partitions() if send else None)

    def _resolve_regexes(self, group: ConsumerGroup, members: list[ConsumerGroupMember]
                         ) -> tuple[dict[str, list[str]], list[tuple[cr.ConsumerGroupKey, bytes | None]]]:
        """Each regular expression the members use, resolved against the topic names now (full match, internal
        topics excluded, as Kafka's RE2J resolution), and the key-16 records of what changed."""
        regexes = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}
        names = self.topics.names() if self.topics is not None and regexes else []
        resolved: dict[str, list[str]] = {}
        records: list[tuple[cr.ConsumerGroupKey, bytes | None]] = []
        for regex in sorted(regexes):
            pattern = re.compile(regex)
            topics = sorted(n for n in names if pattern.fullmatch(n) and not self.topics.get(n).internal)
            resolved[regex] = topics
            if group.resolved_regexes.get(regex) != topics:
                records.append((cr.ConsumerGroupKey(cr.REGULAR_EXPRESSION, group.group_id, regex),
                                cr.encode_regular_expression(cr.RegularExpressionValue(
                                    topics, group.group_epoch + 1, self.clock.milliseconds()))))
        for regex in group.resolved_regexes:
            if regex not in resolved:
                records.append((cr.ConsumerGroupKey(cr.REGULAR_EXPRESSION, group.group_id, regex), None))
        return resolved, records

    def _subscription_metadata(self, names: Iterable[str]) -> dict[str, cr.TopicMetadata]:
        out: dict[str, cr.TopicMetadata] = {}
        for name in sorted(names):
            info = self.topics.get(name) if self.topics is not None else None
            if info is None:
                continue
            out[name] = cr.TopicMetadata(uuid.UUID(bytes=bytes(info.topic_id)), name, int(info.partitions))
        return out

    def _target_assignment_records(self, group: ConsumerGroup) -> list[tuple[cr.ConsumerGroupKey, bytes | None]]:
        """TargetAssignmentBuilder: run the group's assignor; records for changed members, then the epoch."""
        assignor = self._assignor_for(group)
        partitions = {t.topic_id: t.num_partitions for t in group.subscription_metadata.values()}
        ids_by_name = {t.name: t.topic_id for t in group.subscription_metadata.values()}
        subs = [MemberSubscription(m.member_id, {ids_by_name[n] for n in group.member_topics(m) if n in ids_by_name},
                                   group.target.get(m.member_id, {}))
                for m in sorted(group.members.values(), key=lambda m: m.member_id)]
        new_target = assignor.assign(subs, partitions)
        records: list[tuple[cr.ConsumerGroupKey, bytes | None]] = []
        for member_id, assignment in new_target.items():
            if member_id not in group.target or not assignment_equal(group.target[member_id], assignment):
                records.append((cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id),
                                cr.encode_target_member(assignment)))
        records.append((cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_METADATA, group.group_id),
                        cr.encode_epoch(group.group_epoch)))
        return records

    def _assignor_for(self, group: ConsumerGroup) -> PartitionAssignor:
        # Kafka: the assignor most members ask for, else the first configured one
        votes: dict[str, int] = {}
        for m in group.members.values():
            if m.server_assignor in self.assignors:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return self.assignors[max(sorted(votes), key=lambda n: votes[n])]
        return next(iter(self.assignors.values()))

    def assignor_name(self, group: ConsumerGroup) -> str:
        return self._assignor_for(group).name

    @staticmethod
    def _current_assignment_record(group_id: str, m: ConsumerGroupMember) -> tuple[cr.ConsumerGroupKey, bytes]:
        return (cr.ConsumerGroupKey(cr.CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id),
                cr.encode_current_assignment(cr.CurrentAssignmentValue(
                    m.member_epoch, m.previous_member_epoch, int(m.state), m.assigned, m.pending_revocation)))

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list[tuple[cr.ConsumerGroupKey, bytes | None]]:
        return [(cr.ConsumerGroupKey(t, group_id, member_id), None)
                for t in (cr.CURRENT_MEMBER_ASSIGNMENT, cr.TARGET_ASSIGNMENT_MEMBER, cr.MEMBER_METADATA)]

    def group_tombstones(self, group: ConsumerGroup) -> list[tuple[cr.ConsumerGroupKey, bytes | None]]:
        return self._group_tombstones(group)

    def _group_tombstones(self, group: ConsumerGroup) -> list[tuple[cr.ConsumerGroupKey, bytes | None]]:
        records: list[tuple[cr.ConsumerGroupKey, bytes | None]] = []
        for member_id in list(group.members):
            records.extend(self._member_tombstones(group.group_id, member_id))
        records.extend((cr.ConsumerGroupKey(cr.REGULAR_EXPRESSION, group.group_id, regex), None)
                       for regex in group.resolved_regexes)
        records.extend((cr.ConsumerGroupKey(t, group.group_id), None)
                       for t in (cr.TARGET_ASSIGNMENT_METADATA, cr.PARTITION_METADATA, cr.GROUP_METADATA))
        return records

    # ------------------------------------------------------------------------------------------- leave
    def _leave(self, group_id: str, member_id: str, instance_id: str | None, epoch: int) -> HeartbeatResult:
        group = self.groups.get(group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to another member.")
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                leaving = member.copy()
                leaving.previous_member_epoch, leaving.member_epoch = member.member_epoch, LEAVE_GROUP_STATIC_MEMBER_EPOCH
                leaving.pending_revocation = {}
                if self._write(group_id, [self._current_assignment_record(group_id, leaving)]) != E.NONE:
                    raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
                return HeartbeatResult(member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH, 0, None)
        if self.fence_member(group, member, "left the group") != E.NONE:
            raise HeartbeatError(E.COORDINATOR_NOT_AVAILABLE)
        return HeartbeatResult(member_id, epoch, 0, None)

    def fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str) -> int:
        """consumerGroupFenceMember: remove the member, refresh subscription metadata, bump the group epoch."""
        gid = group.group_id
        if downgrade(self, group, member):
            log.info("consumer group %s: member %s %s; only classic members remain, so it is a classic group again",
                     gid, member.member_id, reason)
            return E.NONE
        records = self._member_tombstones(gid, member.member_id)
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        resolved, regex_records = self._resolve_regexes(group, others)
        records.extend(regex_records)
        names = {t for m in others for t in group.member_topics(m, resolved)}
        metadata = self._subscription_metadata(names)
        if metadata != group.subscription_metadata:
            records.append((cr.ConsumerGroupKey(cr.PARTITION_METADATA, gid),
                            cr.encode_partition_metadata(list(metadata.values()))))
        records.append((cr.ConsumerGroupKey(cr.GROUP_METADATA, gid), cr.encode_epoch(group.group_epoch + 1)))
        error = self._write(gid, records)
        if error == E.NONE:
            log.info("consumer group %s: member %s %s", gid, member.member_id, reason)
        return error

    # ------------------------------------------------------------------------------------------- admin
    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def list_groups(self) -> list[ConsumerGroup]:
        return list(self.groups.values())

    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if not group.is_empty():
            return E.NON_EMPTY_GROUP
        error = self._write(group_id, self._group_tombstones(group))
        if error != E.NONE:
            return error
        holder = self._classic_group(group_id)
        return int(self.classic.manager.delete_group(holder)) if holder is not None else E.NONE

    # -------------------------------------------------------------------------------------- OffsetCommit
    def commit_offsets(self, group_id: str, member_id: str, member_epoch: int, api_version: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """ConsumerGroup.validateOffsetCommit, then the classic store (the member epoch is the generation)."""
        group = self.groups[group_id]
        error = E.NONE
        if member_epoch < 0 and group.is_empty():
            pass  # an admin / assign() commit to an empty group, whatever member id it names
        else:
            member = group.members.get(member_id)
            if member is None:
                error = E.UNKNOWN_MEMBER_ID
            elif member.classic is not None:
                # a classic member commits with its generation, which is its member epoch (strict, as before 4.3)
                error = E.ILLEGAL_GENERATION if member_epoch != member.member_epoch else E.NONE
            elif api_version < 9:
                error = E.UNSUPPORTED_VERSION  # consumer-protocol members must use OffsetCommit v9+
            elif member_epoch > member.member_epoch:
                error = E.STALE_MEMBER_EPOCH
            elif member_epoch < member.member_epoch:
                error = self._older_epoch_commit_error(member, member_epoch, offsets)
        if error != E.NONE:
            return dict.fromkeys(offsets, int(error))
        self._offsets_holder(group_id)
        result: dict[TopicPartition, int] = self.classic.commit_offsets(group_id, "", None, -1, offsets)
        return result

    def _older_epoch_commit_error(self, member: ConsumerGroupMember, received: int,
                                  offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """KIP-1251 (ConsumerGroup.createAssignmentEpochValidator): a commit at an epoch older than the member's is
        a lagging member's, not a zombie's, when each partition is one the member holds (assigned or pending
        revocation) since that epoch or before. Kafka runs the check per partition inside OffsetMetadataManager
        .commitOffset, whose exception fails the whole request, so one failing partition refuses them all with
        STALE_MEMBER_EPOCH. Partitions whose metadata is too large are answered before the check, so skipped."""
        limit = self.classic.config.offset_metadata_max_bytes
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > limit:
                continue
            info = self.topics.get(tp.topic) if self.topics is not None else None
            epoch = None if info is None else member.assignment_epoch(uuid.UUID(bytes=bytes(info.topic_id)),
                                                                       tp.partition)
            if epoch is None or epoch > received:
                log.debug("member %s: commit at epoch %d refused for %s (assignment epoch %s, member epoch %d)",
                          member.member_id, received, tp, epoch, member.member_epoch)
                return E.STALE_MEMBER_EPOCH
        log.debug("member %s: commit at epoch %d accepted at member epoch %d (KIP-1251 assignment epochs)",
                  member.member_id, received, member.member_epoch)
        return E.NONE

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           instance_id: str | None, member_epoch: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """TxnOffsetCommit to a consumer group (OffsetMetadataManager.validateTransactionalOffsetCommit with
        ConsumerGroup.validateOffsetCommit): no member fields, or an empty group, need no member; else the member
        must exist (UNKNOWN_MEMBER_ID) at that epoch (ILLEGAL_GENERATION, for either protocol). The offsets are
        staged in the group's offsets holder until the transaction's marker. KIP-1251 changes nothing here in Kafka
        4.3: commitTransactionalOffset checks each partition under the zero topic id, which no member holds, so an
        older epoch still fails (STALE_MEMBER_EPOCH, answered as ILLEGAL_GENERATION)."""
        error = txn_offset_commit_error(self.groups[group_id], member_id, instance_id, member_epoch)
        if error != E.NONE:
            return dict.fromkeys(offsets, int(error))
        self._offsets_holder(group_id)
        result: dict[TopicPartition, int] = self.classic.txn_commit_offsets(
            group_id, producer_id, producer_epoch, "", None, -1, offsets)
        return result

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """ConsumerGroup.validateOffsetFetch (OffsetFetch v9+): a member must name its current epoch."""
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and member_id is None):
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    # ------------------------------------------------------------------------------------------ timers
    def check_expirations(self) -> None:
        """Apply every deadline that has passed on the injected clock (the timer's due operations)."""
        self.timer.run_due()

    def _schedule_member(self, group_id: str, member: ConsumerGroupMember) -> None:
        """Schedule (or cancel) the member's session and rebalance deadlines as they are now."""
        member_id = member.member_id
        for kind, due in (("session-timeout", member.session_deadline_ms),
                          ("rebalance-timeout", member.rebalance_deadline_ms)):
            key = (kind, group_id, member_id)
            if due < 0:
                self.timer.cancel(key)
            else:
                self.timer.schedule(key, due, lambda: self._on_member_deadline(group_id, member_id))

    def _on_member_deadline(self, group_id: str, member_id: str) -> None:
        """A session that ran out fences the member; so does a revocation not done within the rebalance timeout
        (Kafka's consumerGroupFenceMemberOperation)."""
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        now = self._now()
        if member.session_deadline_ms >= 0 and now >= member.session_deadline_ms:
            error = self.fence_member(group, member, "session timed out")
        elif member.rebalance_deadline_ms >= 0 and now >= member.rebalance_deadline_ms:
            error = self.fence_member(group, member, "did not revoke its partitions within the rebalance timeout")
        else:
            self._schedule_member(group_id, member)  # its deadlines moved since
            return
        if error != E.NONE:  # not written: try again
            self.timer.schedule(("session-timeout", group_id, member_id), now + _FENCE_RETRY_MS,
                                lambda: self._on_member_deadline(group_id, member_id))

    def shutdown(self) -> None:
        self.timer.stop()

    def group_state(self, group_id: str) -> ConsumerGroupState | None:
        group = self.groups.get(group_id)
        return None if group is None else group.state
