"""Classic-protocol members inside a KIP-848 consumer group (Kafka's GroupMetadataManager
classicGroupJoinToConsumerGroup / SyncToConsumerGroup / HeartbeatToConsumerGroup / LeaveToConsumerGroup).

A consumer using `group.protocol=classic` that joins a live consumer group becomes one of its members: its
JoinGroup subscription (ConsumerProtocolSubscription) is its subscription, its owned partitions tell what it
has revoked, the server-side assignor decides, JoinGroup answers at once with its member epoch as the
generation (no leader, nothing for it to assign) and SyncGroup hands it its partitions as a
ConsumerProtocolAssignment. When the group moves on, its Heartbeat gets REBALANCE_IN_PROGRESS and it rejoins.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from tidelog.coordinator.group.classic.group import GroupMetadata, GroupState
from tidelog.coordinator.group.classic.member import JoinResult, MemberMetadata, SyncResult
from tidelog.coordinator.group.consumer import records as cr
from tidelog.coordinator.group.consumer.errors import HeartbeatError
from tidelog.coordinator.group.consumer.group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from tidelog.coordinator.schema_io import SchemaReader, SchemaWriter
from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator

E = ErrorCode
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(slots=True)
class Subscription:
    version: int
    topics: list[str]
    owned: dict[str, list[int]]
    rack_id: str | None


def parse_subscription(data: bytes) -> Subscription:
    """ConsumerProtocolSubscription v0-3: Topics, UserData, OwnedPartitions (v1+), GenerationId (v2+),
    RackId (v3+). Raises ValueError on malformed bytes."""
    r = SchemaReader(data)
    version = r.i16()
    topics = [r.string() or "" for _ in range(max(0, r.i32()))]
    r.bytes_()  # UserData
    owned: dict[str, list[int]] = {}
    rack = None
    if version >= 1 and not r.at_end():
        for _ in range(max(0, r.i32())):
            topic = r.string() or ""
            owned[topic] = [r.i32() for _ in range(max(0, r.i32()))]
        if version >= 2 and not r.at_end():
            r.i32()  # GenerationId
        if version >= 3 and not r.at_end():
            rack = r.string()
    return Subscription(version, topics, owned, rack)


def encode_assignment(version: int, partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment (AssignedPartitions, UserData null) at the member's subscription version."""
    w = SchemaWriter()
    w.i16(max(0, min(version, 3)))
    w.array_len(len(partitions))
    for topic, parts in sorted(partitions.items()):
        w.string(topic)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
    w.bytes_(None)  # UserData
    return w.to_bytes()


class ClassicMembers:
    """The classic-protocol entry points of a ConsumerGroupCoordinator."""

    def __init__(self, coordinator: ConsumerGroupCoordinator) -> None:
        self.cg = coordinator

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember | int:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None or member.classic is None:
                return E.UNKNOWN_MEMBER_ID
            return member
        member = group.static_member(instance_id)
        if member is None or member.classic is None:
            return E.UNKNOWN_MEMBER_ID
        if member.member_id != member_id:
            return E.FENCED_INSTANCE_ID
        return member

    def join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id:
            member_id = str(uuid.uuid4())
            if require_known_member_id:  # KIP-394, as for classic groups
                return JoinResult(E.MEMBER_ID_REQUIRED, member_id)
        # a member id the group does not know yet (the KIP-394 round trip) joins as a new member, as in Kafka
        try:
            subscription = parse_subscription(protocols[0][1])
        except (ValueError, UnicodeDecodeError):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        owned = []
        for topic, parts in subscription.owned.items():
            info = self.cg.topics.get(topic) if self.cg.topics is not None else None
            if info is not None:
                owned.append(SimpleNamespace(topic_id=uuid.UUID(bytes=bytes(info.topic_id)), partitions=parts))
        request = SimpleNamespace(
            group_id=group_id, member_id=member_id, member_epoch=0, instance_id=instance_id,
            rack_id=subscription.rack_id or None, rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=subscription.topics, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=owned)
        classic = ClassicMemberMetadata(session_timeout_ms, list(protocols))
        try:
            result = self.cg.heartbeat_member(request, client_id, client_host, classic)
        except HeartbeatError as e:
            return JoinResult(e.code, member_id)
        return JoinResult(E.NONE, member_id, result.member_epoch, CONSUMER_PROTOCOL_TYPE, protocols[0][0])

    def sync(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None) -> SyncResult:
        group = self.cg.groups[group_id]
        found = self._member(group, member_id, instance_id)
        if isinstance(found, int):
            return SyncResult(found)
        member = found
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return SyncResult(E.ILLEGAL_GENERATION)
        name = member.classic.supported_protocols[0][0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != name):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        self.cg.touch_session(group_id, member)
        by_name: dict[str, list[int]] = {}
        for topic_id, parts in member.assigned.items():
            info = self.cg.topics.by_id(topic_id.bytes) if self.cg.topics is not None else None
            if info is not None and parts:
                by_name[info.name] = sorted(parts)
        version = parse_subscription(member.classic.supported_protocols[0][1]).version
        return SyncResult(E.NONE, CONSUMER_PROTOCOL_TYPE, name, encode_assignment(version, by_name))

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> int:
        group = self.cg.groups[group_id]
        found = self._member(group, member_id, instance_id)
        if isinstance(found, int):
            return found
        member = found
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        self.cg.touch_session(group_id, member)
        if member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS:
            return E.REBALANCE_IN_PROGRESS
        if member.state == MemberState.UNRELEASED_PARTITIONS and self._released(group, member):
            return E.REBALANCE_IN_PROGRESS  # what it waits for is free now: rejoin to get it
        return E.NONE

    @staticmethod
    def _released(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        epochs = group.partition_epochs(exclude=member.member_id)
        target = group.target.get(member.member_id, {})
        return any((t, p) not in epochs for t, ps in target.items() for p in ps
                   if p not in member.assigned.get(t, {}))

    def leave(self, group_id: str, members: list[Any]) -> list[int]:
        """LeaveGroup of classic members (LeaveMember objects): one error per member."""
        errors: list[int] = []
        for leaving in members:
            group = self.cg.groups.get(group_id)
            if group is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
                continue
            if leaving.group_instance_id is None:
                member = group.members.get(leaving.member_id)
                found: ConsumerGroupMember | int = E.UNKNOWN_MEMBER_ID if member is None or member.classic is None \
                    else member
            else:
                found = group.static_member(leaving.group_instance_id) or E.UNKNOWN_MEMBER_ID
                if not isinstance(found, int) and leaving.member_id and found.member_id != leaving.member_id:
                    found = E.FENCED_INSTANCE_ID
            if isinstance(found, int):
                errors.append(found)
                continue
            errors.append(self.cg.fence_member(group, found, "left the group (classic LeaveGroup)"))
        return errors


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocolAssignment (any version): AssignedPartitions by topic name."""
    if not data:
        return {}
    r = SchemaReader(data)
    r.i16()
    out: dict[str, list[int]] = {}
    for _ in range(max(0, r.i32())):
        topic = r.string() or ""
        out[topic] = [r.i32() for _ in range(max(0, r.i32()))]
    return out


def upgrade_records(cg: ConsumerGroupCoordinator, classic: Any) -> list[tuple[Any, bytes | None]] | None:
    """ConsumerGroup.fromClassicGroup + createConsumerGroupRecords: the records that turn a live classic group
    whose members speak the consumer embedded protocol into a consumer group (members keep their
    partitions at epoch = the classic generation). None when it cannot be upgraded (validateOnlineUpgrade)."""
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or len(classic.members) > cg.config.max_size:
        return None
    gid, generation = classic.group_id, classic.generation_id
    records: list[tuple[Any, bytes | None]] = []
    targets: list[tuple[Any, bytes | None]] = []
    currents: list[tuple[Any, bytes | None]] = []
    try:
        for m in classic.members.values():
            subscription = parse_subscription(m.metadata(classic.protocol_name) if classic.protocol_name
                                              else m.protocols[0][1])
            assigned: dict[uuid.UUID, set[int]] = {}
            for topic, parts in parse_assignment(m.assignment).items():
                info = cg.topics.get(topic) if cg.topics is not None else None
                if info is not None:
                    assigned[uuid.UUID(bytes=bytes(info.topic_id))] = set(parts)
            records.append((cr.ConsumerGroupKey(cr.MEMBER_METADATA, gid, m.member_id),
                            cr.encode_member_metadata(cr.MemberMetadataValue(
                                m.group_instance_id, subscription.rack_id or None, m.client_id, "/" + m.client_host,
                                sorted(set(subscription.topics)), None, m.rebalance_timeout_ms, None,
                                (m.session_timeout_ms, list(m.protocols))))))
            targets.append((cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_MEMBER, gid, m.member_id),
                            cr.encode_target_member(assigned)))
            currents.append((cr.ConsumerGroupKey(cr.CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id),
                             cr.encode_current_assignment(cr.CurrentAssignmentValue(
                                 generation, generation, int(MemberState.STABLE),
                                 cr.with_epoch(assigned, max(generation, 0)), {}))))
    except (ValueError, UnicodeDecodeError):
        return None  # a malformed embedded protocol: Kafka refuses the upgrade
    records.append((cr.ConsumerGroupKey(cr.GROUP_METADATA, gid), cr.encode_epoch(generation)))
    records.extend(targets)
    records.append((cr.ConsumerGroupKey(cr.TARGET_ASSIGNMENT_METADATA, gid), cr.encode_epoch(generation)))
    records.extend(currents)
    return records


def downgrade(cg: ConsumerGroupCoordinator, group: ConsumerGroup, leaving: ConsumerGroupMember) -> bool:
    """convertToClassicGroup: when the last consumer-protocol member leaves and only classic members remain, the
    group becomes a classic group again (validateOnlineDowngradeWithFencedMember). Its members keep their
    current partitions in a Stable classic group whose generation is the group epoch, which then prepares a
    rebalance so they rejoin the classic way. False when the group does not qualify."""
    remaining = [m for m in group.members.values() if m.member_id != leaving.member_id]
    classic_coordinator = cg.classic
    if (leaving.classic is not None or not remaining or any(m.classic is None for m in remaining)
            or len(remaining) > classic_coordinator.config.group_max_size):
        return False
    gid = group.group_id
    records = cg.group_tombstones(group)
    holder: GroupMetadata = classic_coordinator.manager.get_group(gid) or classic_coordinator.manager.add_group(
        GroupMetadata(gid))
    protocol = remaining[0].classic.supported_protocols[0][0] if remaining[0].classic else ""
    holder.members.clear()
    holder.static_members.clear()
    holder.protocol_type, holder.protocol_name = CONSUMER_PROTOCOL_TYPE, protocol
    holder.generation_id = group.group_epoch  # the members' epoch: their commits stay valid (fromConsumerGroup)
    now = cg.clock.monotonic_ms()
    for m in remaining:
        assert m.classic is not None
        by_name: dict[str, list[int]] = {}
        for topic_id, parts in m.assigned.items():
            info = cg.topics.by_id(topic_id.bytes) if cg.topics is not None else None
            if info is not None and parts:
                by_name[info.name] = sorted(parts)
        version = parse_subscription(m.classic.supported_protocols[0][1]).version
        holder.add(MemberMetadata(m.member_id, m.instance_id, m.client_id, m.client_host.lstrip("/"),
                                  max(m.rebalance_timeout_ms, 0), m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE,
                                  list(m.classic.supported_protocols), encode_assignment(version, by_name),
                                  last_heartbeat_ms=now))
    holder.leader_id = remaining[0].member_id
    holder.state = GroupState.STABLE
    encoded = [(cr_encode_key(k), v) for k, v in records]
    encoded.append(classic_coordinator.manager.group_record(holder))
    if classic_coordinator.manager._append(gid, encoded, for_commit=False) != E.NONE:
        holder.members.clear()
        holder.static_members.clear()
        holder.protocol_type = holder.protocol_name = holder.leader_id = None
        holder.state = GroupState.EMPTY
        return False
    for key, value in records:
        cg.replay(key, value)
    classic_coordinator.prepare_rebalance_after_downgrade(holder)
    return True


def cr_encode_key(key: Any) -> bytes:
    return cr.encode_key(key)
