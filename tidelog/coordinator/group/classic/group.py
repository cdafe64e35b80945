"""A classic consumer group's state (Kafka's `GroupMetadata` / `ClassicGroup`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from tidelog.coordinator.group.classic.member import MemberMetadata
from tidelog.storage import TopicPartition


class GroupState(Enum):
    """Wire names used by DescribeGroups/ListGroups (Kafka's classic GroupCoordinator)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's GroupMetadata.validPreviousStates
_VALID_PREVIOUS: dict[GroupState, set[GroupState]] = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: {GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                      GroupState.EMPTY, GroupState.DEAD},
}


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(slots=True)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = -1                 # wall clock of the last transition (current_state_timestamp)
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)    # insertion order = join order
    static_members: dict[str, str] = field(default_factory=dict)        # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)       # member id -> expiry (monotonic ms)
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    # TxnOffsetCommit offsets staged until their transaction ends: producer id -> offsets
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    # rebalance bookkeeping (monotonic ms); -1 = no deadline
    join_deadline_ms: int = -1
    initial_delay_deadline_ms: int = -1          # group.initial.rebalance.delay.ms window (InitialDelayedJoin)
    initial_delay_max_ms: int = -1               # the window never extends past this
    new_member_added: bool = False
    sync_deadline_ms: int = -1                   # members that never SyncGroup are removed (KIP-732-ish)

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {state}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Kafka's GroupMetadata.prepareTxnOffsetCommit: staged, invisible to OffsetFetch until committed."""
        self.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def complete_pending_txn_offset_commit(self, producer_id: int, commit: bool) -> int:
        """Kafka's completePendingTxnOffsetCommit: a COMMIT marker makes the staged offsets the group's
        offsets, an ABORT drops them. Returns how many offsets were settled."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if commit:
            self.offsets.update(pending)
        return len(pending)

    def has_pending_txn_offsets(self, tp: TopicPartition) -> bool:
        return any(tp in offsets for offsets in self.pending_txn_offsets.values())

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static member whose instance id is now held by another member id (FENCED_INSTANCE_ID)."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for m in self.members.values():
            own = set(m.protocol_names())
            names = own if names is None else names & own
        return names or set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its first supported candidate; most votes wins (ties go to the
        earliest member's preference, which keeps the choice deterministic)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        best = max(votes.values())
        for m in self.members.values():
            choice = m.vote(candidates)
            if votes[choice] == best:
                return choice
        raise AssertionError("unreachable")

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, for `consumer` groups (ConsumerProtocolSubscription), else None."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics


def parse_subscription_topics(data: bytes) -> set[str] | None:
    """Topic names from ConsumerProtocolSubscription (any version: version INT16, topics [STRING], ...)."""
    try:
        if len(data) < 6:
            return None
        pos = 2
        count = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        pos += 4
        topics = set()
        for _ in range(max(0, count)):
            n = int.from_bytes(data[pos : pos + 2], "big", signed=True)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            topics.add(data[pos : pos + n].decode())
            pos += n
        return topics
    except (UnicodeDecodeError, ValueError):
        return None
