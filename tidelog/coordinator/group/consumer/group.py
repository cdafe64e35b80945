"""The KIP-848 consumer group model (Kafka's ConsumerGroup, ConsumerGroupMember, MemberState) and the
member reconciliation of Kafka's CurrentAssignmentBuilder.

Epochs: the group epoch moves when membership or subscriptions (or the subscribed topics' partitions)
change; the target assignment is computed for a group epoch (its assignment epoch); each member converges to
the target at its own pace: it first revokes what it must give up (staying at its epoch), then receives what
is free and moves to the assignment epoch. A partition is handed to a new owner only once no other member
holds it, assigned or pending revocation (incremental cooperative rebalancing).

Assignment epochs (KIP-1251): every partition a member holds, assigned or pending revocation, carries the member
epoch at which it was assigned to the member: a partition it keeps keeps its epoch, one it must revoke keeps it while
pending, a newly assigned one gets the epoch the member moves to. OffsetCommit accepts a commit at an older member
epoch for a partition the member holds since that epoch or before.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from tidelog.coordinator.group.consumer.assignors import Assignment
from tidelog.coordinator.group.consumer.records import AssignmentWithEpochs, TopicMetadata, partitions_of

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(IntEnum):
    """Kafka's MemberState byte values (stored in ConsumerGroupCurrentMemberAssignmentValue.State)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ClassicMemberMetadata:
    """A member using the classic protocol (ConsumerGroupMemberMetadataValue.ClassicMemberMetadata)."""

    session_timeout_ms: int
    supported_protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: AssignmentWithEpochs = field(default_factory=dict)  # topic id -> partition -> assignment epoch
    pending_revocation: AssignmentWithEpochs = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None  # set for classic-protocol members
    # runtime only (not in records): deadlines on the coordinator's clock (monotonic ms), -1 = none
    session_deadline_ms: int = -1
    rebalance_deadline_ms: int = -1

    def copy(self) -> ConsumerGroupMember:
        return copy.deepcopy(self)

    def same_metadata(self, other: ConsumerGroupMember) -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic) == (
            other.instance_id, other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names,
            other.subscribed_topic_regex, other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def same_assignment(self, other: ConsumerGroupMember) -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, _norm_epochs(self.assigned),
                _norm_epochs(self.pending_revocation)) == (
            other.member_epoch, other.previous_member_epoch, other.state, _norm_epochs(other.assigned),
            _norm_epochs(other.pending_revocation))

    def assigned_partitions(self) -> Assignment:
        """The assigned partitions without their epochs (what the heartbeat response and describe show)."""
        return partitions_of(self.assigned)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """ConsumerGroupMember.getAssignmentEpoch, then getPendingRevocationEpoch: the epoch at which the member
        was assigned the partition it holds, or None when it holds it neither way."""
        epoch = self.assigned.get(topic_id, {}).get(partition)
        return self.pending_revocation.get(topic_id, {}).get(partition) if epoch is None else epoch


def _norm(a: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(p) for t, p in a.items() if p}


def _norm_epochs(a: AssignmentWithEpochs) -> dict[uuid.UUID, dict[int, int]]:
    return {t: ps for t, ps in a.items() if ps}


def assignment_equal(a: Assignment, b: Assignment) -> bool:
    return _norm(a) == _norm(b)


def is_subset(owned: Assignment, assigned: AssignmentWithEpochs) -> bool:
    return all(set(ps) <= assigned.get(t, {}).keys() for t, ps in owned.items())


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)  # by topic name
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target assignment
    resolved_regexes: dict[str, list[str]] = field(default_factory=dict)  # regex -> matching topic names

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def partition_epochs(self, exclude: str | None = None) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> epoch of the member holding it (assigned or pending revocation)."""
        owners: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for a in (m.assigned, m.pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        owners[(t, p)] = m.member_epoch
        return owners

    def member_topics(self, member: ConsumerGroupMember,
                      resolved: dict[str, list[str]] | None = None) -> set[str]:
        """The member's topic names plus those its regular expression resolved to."""
        regexes = self.resolved_regexes if resolved is None else resolved
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            topics.update(regexes.get(member.subscribed_topic_regex, []))
        return topics


def owns_revoked_partitions(owned: Assignment | None, pending: AssignmentWithEpochs) -> bool:
    """Whether the member may still hold partitions it must revoke (unknown when it did not say)."""
    if owned is None:
        return True
    return any(p in pending.get(t, {}) for t, ps in owned.items() for p in ps)


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerGroupMember:
    """CurrentAssignmentBuilder.build: the member's next current assignment (a new object if it changes)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked_partitions(owned, member.pending_revocation):
            return member
        return _next_assignment(member, member.member_epoch + 1, target_epoch, target, owned, partition_epoch)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    return _next_assignment(member, target_epoch, target_epoch, target, owned, partition_epoch)


def _with(member: ConsumerGroupMember, state: MemberState, epoch: int, assigned: AssignmentWithEpochs,
          pending: AssignmentWithEpochs) -> ConsumerGroupMember:
    updated = member.copy()
    if epoch != member.member_epoch:
        updated.previous_member_epoch = member.member_epoch
        updated.member_epoch = epoch
    updated.state = state
    updated.assigned = assigned
    updated.pending_revocation = pending
    return updated


def _next_assignment(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
                     owned: Assignment | None, partition_epoch: Callable[[uuid.UUID, int], int]
                     ) -> ConsumerGroupMember:
    unreleased = False
    assigned: AssignmentWithEpochs = {}
    revoke: AssignmentWithEpochs = {}
    pending_assignment: Assignment = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, set())
        current = member.assigned.get(topic_id, {})  # partition -> assignment epoch
        keep = {p: e for p, e in current.items() if p in wanted}  # kept and revoked partitions keep their epoch
        to_revoke = {p: e for p, e in current.items() if p not in keep}
        to_assign = wanted - keep.keys()
        free = {p for p in to_assign if partition_epoch(topic_id, p) == -1}
        if free != to_assign:
            unreleased = True
        if keep:
            assigned[topic_id] = keep
        if to_revoke:
            revoke[topic_id] = to_revoke
        if free:
            pending_assignment[topic_id] = free
    if revoke and owns_revoked_partitions(owned, revoke):
        # revoke first, at the current epoch; nothing new until the member confirms
        return _with(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoke)
    for topic_id, parts in pending_assignment.items():
        # newly assigned at the epoch the member moves to (CurrentAssignmentBuilder.computeNextAssignment)
        assigned.setdefault(topic_id, {}).update(dict.fromkeys(parts, target_epoch))
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with(member, state, target_epoch, assigned, {})
