"""The classic group coordinator (Kafka's `GroupCoordinator` for `group.protocol=classic`).

State machine (Kafka's classic GroupCoordinator): Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead.
JoinGroup and SyncGroup calls that must wait are parked as asyncio futures on the member. Deadlines (sessions,
pending members, rebalance/initial delay, sync, offset retention) are operations on the coordinator's keyed
DeadlineTimer (tidelog.coordinator.timer, Kafka's CoordinatorTimer), on the injected Clock, under Kafka's keys:
a member's heartbeat, a pending member, the group's join and sync deadlines. Each operation checks, when it runs,
that its deadline still holds. Tests using a ManualClock advance the clock and call `check_expirations()`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from tidelog.clock import Clock
from tidelog.coordinator.group.classic.group import GroupMetadata, GroupState, OffsetAndMetadata
from tidelog.coordinator.group.classic.member import JoinResult, MemberMetadata, SyncResult
from tidelog.coordinator.group.config import GroupCoordinatorConfig
from tidelog.coordinator.group.metadata_manager import GroupMetadataManager
from tidelog.coordinator.group.store import OffsetsStore
from tidelog.coordinator.timer import DeadlineTimer
from tidelog.protocol.errors import ErrorCode
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)

E = ErrorCode


@dataclass(slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None = None


class GroupCoordinator:
    def __init__(self, clock: Clock, config: GroupCoordinatorConfig | None = None,
                 store: OffsetsStore | None = None) -> None:
        self.clock = clock
        self.config = config or GroupCoordinatorConfig()
        self.manager = GroupMetadataManager(clock, self.config, store)
        # the group coordinator's one timer (classic and KIP-848 consumer groups, as Kafka's coordinator shard)
        self.timer = DeadlineTimer(clock.monotonic_ms, "group coordinator")
        self.consumer_groups: Any = None  # KIP-848 ConsumerGroupCoordinator, set by create_group_coordinator
        self.share_groups: Any = None  # KIP-932 ShareGroupCoordinator, set by create_group_coordinator
        self.streams_groups: Any = None  # KIP-1071 StreamsGroupCoordinator, set by create_group_coordinator

    # ---------------------------------------------------------------------------------------- lifecycle
    def startup(self) -> None:
        self.manager.load()
        if self.consumer_groups is not None:
            self.consumer_groups.load()  # consumer-group records, after the offsets they share
        if self.share_groups is not None:
            self.share_groups.load()
        if self.streams_groups is not None:
            self.streams_groups.load()
        for group in self.manager.groups.values():
            self._schedule_group(group)
        self._schedule_retention_check()
        self.timer.start()

    def shutdown(self) -> None:
        self.timer.stop()
        # each step on its own: one that fails (a state file that cannot be written) must not skip the others
        for name, owner in (("consumer", self.consumer_groups), ("streams", self.streams_groups),
                            ("share", self.share_groups)):  # streams and share: their last changes to disk
            if owner is None:
                continue
            try:
                owner.shutdown()
            except Exception:
                log.exception("Shutting down the %s groups failed", name)
        for group in self.manager.groups.values():
            for m in group.members.values():
                m.complete_join(JoinResult(E.COORDINATOR_NOT_AVAILABLE, m.member_id))
                m.complete_sync(SyncResult(E.COORDINATOR_NOT_AVAILABLE))

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` if it does not exist yet (Kafka creates it on the first
        FindCoordinator for a group). Raises KafkaError when it cannot be created."""
        if self.manager.store is not None:
            self.manager.store.ensure_topic()

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def _wall(self) -> int:
        return self.clock.milliseconds()

    # ----------------------------------------------------------------------------------------- JoinGroup
    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, client_id: str,
                         client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         require_known_member_id: bool = False,
                         supports_skip_assignment: bool = False) -> JoinResult:
        outcome = self._join(group_id, member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
                             supports_skip_assignment)
        if isinstance(outcome, JoinResult):
            return outcome
        return await asyncio.shield(outcome)

    def _join(self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
              session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
              protocols: list[tuple[str, bytes]], require_known_member_id: bool,
              supports_skip_assignment: bool) -> JoinResult | asyncio.Future[JoinResult]:
        if not group_id:
            return JoinResult(E.INVALID_GROUP_ID, member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(E.INVALID_SESSION_TIMEOUT, member_id)
        is_unknown = member_id == ""
        group = self.manager.get_group(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
            group = self.manager.add_group(GroupMetadata(group_id, state_timestamp_ms=self._wall()))
        if group.is_(GroupState.DEAD):
            # the group was just removed; the client rediscovers the coordinator and retries
            return JoinResult(E.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(E.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if is_unknown and len(group.members) + len(group.pending_members) >= self.config.group_max_size:
            return JoinResult(E.GROUP_MAX_SIZE_REACHED, member_id)
        args = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
        if is_unknown:
            return self._new_member_join(group, instance_id, require_known_member_id,
                                         supports_skip_assignment, *args)
        return self._current_member_join(group, member_id, instance_id, *args)

    def _new_member_join(self, group: GroupMetadata, instance_id: str | None, require_known_member_id: bool,
                         supports_skip_assignment: bool, client_id: str, client_host: str,
                         session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]]) -> JoinResult | asyncio.Future[JoinResult]:
        if instance_id is not None:
            new_id = f"{instance_id}-{uuid.uuid4()}"
            old_id = group.static_member_id(instance_id)
            if old_id is not None and group.has_member(old_id):
                replaced = self._replace_static_member(group, old_id, new_id, supports_skip_assignment,
                                                       session_timeout_ms, rebalance_timeout_ms, protocols)
                if new_id in group.members:  # the member's session goes on under its new id
                    self._schedule_heartbeat(group, group.members[new_id])
                return replaced
            return self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                                  session_timeout_ms, rebalance_timeout_ms, protocol_type,
                                                  protocols)
        new_id = f"{client_id}-{uuid.uuid4()}"
        if require_known_member_id:
            # KIP-394: hand out the id first; the member counts as pending until it rejoins with it
            group.pending_members[new_id] = self._now() + session_timeout_ms
            self._schedule_pending(group, new_id)
            return JoinResult(E.MEMBER_ID_REQUIRED, new_id)
        return self._add_member_and_rebalance(group, new_id, None, client_id, client_host, session_timeout_ms,
                                              rebalance_timeout_ms, protocol_type, protocols)

    def _current_member_join(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, session_timeout_ms: int,
                             rebalance_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]]) -> JoinResult | asyncio.Future[JoinResult]:
        if group.is_pending(member_id):
            if instance_id is not None:
                return JoinResult(E.FENCED_INSTANCE_ID, member_id)
            return self._add_member_and_rebalance(group, member_id, None, client_id, client_host,
                                                  session_timeout_ms, rebalance_timeout_ms, protocol_type,
                                                  protocols)
        if group.is_fenced(member_id, instance_id):
            return JoinResult(E.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None:
            return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                     session_timeout_ms)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # the join response was probably lost: answer again with the current generation
                member.last_heartbeat_ms = self._now()
                return self._current_join_result(group, member.member_id)
            return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                     session_timeout_ms)
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoining, or changed metadata (e.g. a new subscription), forces a rebalance
                return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                         session_timeout_ms)
            member.last_heartbeat_ms = self._now()
            return self._current_join_result(group, member.member_id, with_members=False)
        return JoinResult(E.UNKNOWN_MEMBER_ID, member_id)

    def _current_join_result(self, group: GroupMetadata, member_id: str, with_members: bool = True,
                             skip_assignment: bool = False) -> JoinResult:
        members = []
        if with_members and group.is_leader(member_id) and group.protocol_name is not None:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(E.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", skip_assignment, members)

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, session_timeout_ms: int,
                                  rebalance_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]]) -> asyncio.Future[JoinResult]:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, list(protocols),
                                last_heartbeat_ms=self._now(), is_new=True)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        group.add(member)
        self._schedule_heartbeat(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_delay_deadline_ms >= 0:
            group.new_member_added = True
        self._maybe_prepare_rebalance(group, f"adding member {member_id}")
        self._try_complete_join(group)
        return fut

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int) -> asyncio.Future[JoinResult]:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.last_heartbeat_ms = self._now()
        self._schedule_heartbeat(group, member)  # the session may be shorter now
        # a second join from the same member supersedes the first (Kafka answers the old one with the new one)
        old = member.join_future
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = fut
        if old is not None and not old.done():
            def hand_over(f: asyncio.Future[JoinResult], old: asyncio.Future[JoinResult] = old) -> None:
                if not old.done() and not f.cancelled():
                    old.set_result(f.result())

            fut.add_done_callback(hand_over)
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._try_complete_join(group)
        return fut

    def _replace_static_member(self, group: GroupMetadata, old_id: str, new_id: str,
                               supports_skip_assignment: bool, session_timeout_ms: int, rebalance_timeout_ms: int,
                               protocols: list[tuple[str, bytes]]) -> JoinResult | asyncio.Future[JoinResult]:
        """A known group.instance.id joins with no member id (Kafka's GroupMetadataManager
        .updateStaticMemberThenRebalanceOrCompleteJoin). The member keeps its client id/host and assignment
        under the new id; only a change of the group's selected protocol makes a Stable group rebalance."""
        current_leader = group.leader_id
        member = self._rekey_static_member(group, old_id, new_id)
        saved = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.protocols = list(protocols)
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        member.last_heartbeat_ms = self._now()
        if group.is_(GroupState.STABLE) and group.select_protocol() == group.protocol_name:
            error = self.manager.store_group(group)
            if error != E.NONE:
                # the new member id could not be stored: back to the old one (ClassicGroup.replaceStaticMember)
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = saved
                self._rekey_static_member(group, new_id, old_id)
                return JoinResult(error, "", group.generation_id, group.protocol_type, group.protocol_name,
                                  current_leader or "")
            if supports_skip_assignment:
                # KIP-814 (JoinGroup v9+, KAFKA-13435): a rejoining leader gets the members but keeps the
                # current assignment, it must not compute a new one
                is_leader = group.is_leader(new_id)
                return self._current_join_result(group, new_id, with_members=is_leader,
                                                 skip_assignment=is_leader)
            # before v9 the response names the leader as it was before the rejoin, so a rejoining leader
            # takes itself for a follower and just fetches its assignment with SyncGroup
            return JoinResult(E.NONE, new_id, group.generation_id, group.protocol_type, group.protocol_name,
                              current_leader or "")
        # Stable with a new selected protocol, or CompletingRebalance (the leader may be assigning to the old
        # member id): rebalance; PreparingRebalance: the join waits for the others
        return self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                                 session_timeout_ms)

    @staticmethod
    def _rekey_static_member(group: GroupMetadata, old_id: str, new_id: str) -> MemberMetadata:
        """Kafka's ClassicGroup.replaceStaticMember: the member under `old_id` continues as `new_id` (leadership
        included); the calls the old incarnation has parked fail with FENCED_INSTANCE_ID."""
        member = group.members[old_id]
        member.complete_join(JoinResult(E.FENCED_INSTANCE_ID, old_id))
        member.complete_sync(SyncResult(E.FENCED_INSTANCE_ID))
        member.member_id = new_id
        # in place and in order: the order breaks ties of select_protocol, which a restart must not change
        members = list(group.members.items())
        group.members.clear()
        group.members.update((new_id if mid == old_id else mid, m) for mid, m in members)
        assert member.group_instance_id is not None
        group.static_members[member.group_instance_id] = new_id
        if group.is_leader(old_id):
            group.leader_id = new_id
        return member

    # ------------------------------------------------------------------------------------- rebalancing
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        now = self._now()
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # members waiting for their assignment must rejoin (Kafka resetAndPropagateAssignmentError)
            for m in group.members.values():
                m.assignment = b""
                m.complete_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
        group.sync_deadline_ms = -1
        timeout = group.max_rebalance_timeout_ms()
        delay = self.config.group_initial_rebalance_delay_ms
        if group.is_(GroupState.EMPTY) and delay > 0:
            # InitialDelayedJoin: wait for more members; extended while they keep arriving, capped by timeout
            group.initial_delay_deadline_ms = now + min(delay, timeout)
            group.initial_delay_max_ms = now + timeout
            group.new_member_added = False
        else:
            group.initial_delay_deadline_ms = -1
        group.join_deadline_ms = now + timeout
        group.transition_to(GroupState.PREPARING_REBALANCE, self._wall())
        self._schedule_group(group)  # the join deadline; members whose parked SyncGroup just ended
        log.info("group %s: preparing to rebalance (generation %d): %s", group.group_id, group.generation_id,
                 reason)

    def prepare_rebalance_after_downgrade(self, group: GroupMetadata) -> None:
        """A KIP-848 group just turned back into this classic group (convertToClassicGroup): rebalance it."""
        self._prepare_rebalance(group, "Downgrade the consumer group to a classic group.")

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if (group.is_(GroupState.PREPARING_REBALANCE) and group.initial_delay_deadline_ms < 0
                and group.all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start the next generation, answer joins."""
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        for m in [m for m in group.members.values() if not m.is_awaiting_join]:
            log.info("group %s: removing member %s that did not rejoin", group.group_id, m.member_id)
            group.remove(m.member_id)
        group.join_deadline_ms = group.initial_delay_deadline_ms = group.initial_delay_max_ms = -1
        group.new_member_added = False
        group.generation_id += 1
        now = self._now()
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition_to(GroupState.EMPTY, self._wall())
            self.manager.store_group(group)
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition_to(GroupState.COMPLETING_REBALANCE, self._wall())
        group.sync_deadline_ms = now + group.max_rebalance_timeout_ms()
        log.info("group %s: generation %d with %d member(s), protocol %s", group.group_id, group.generation_id,
                 len(group.members), group.protocol_name)
        for m in group.members.values():
            m.last_heartbeat_ms = now
            m.is_new = False
            m.complete_join(self._current_join_result(group, m.member_id))
        self._schedule_group(group)

    def _remove_member_and_update(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # a parked join of a removed member is answered UNKNOWN_MEMBER_ID (Kafka removeMemberAndUpdateGroup)
        member.complete_join(JoinResult(E.UNKNOWN_MEMBER_ID, member.member_id))
        member.complete_sync(SyncResult(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        log.info("group %s: member %s removed: %s", group.group_id, member.member_id, reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ----------------------------------------------------------------------------------------- SyncGroup
    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        outcome = self._sync(group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name,
                             assignments)
        if isinstance(outcome, SyncResult):
            return outcome
        return await asyncio.shield(outcome)

    def _sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
              protocol_type: str | None, protocol_name: str | None,
              assignments: dict[str, bytes]) -> SyncResult | asyncio.Future[SyncResult]:
        group = self.manager.get_group(group_id)
        if group is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_fenced(member_id, instance_id):
            return SyncResult(E.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncResult(E.ILLEGAL_GENERATION)
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return SyncResult(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(GroupState.EMPTY):
            return SyncResult(E.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(E.REBALANCE_IN_PROGRESS)
        member.last_heartbeat_ms = self._now()
        if group.is_(GroupState.STABLE):
            return SyncResult(E.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment arrives
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        old = member.sync_future
        member.sync_future = fut
        if old is not None and not old.done():
            old.set_result(SyncResult(E.REBALANCE_IN_PROGRESS))
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}  # omitted members get b""
            error = self.manager.store_group(group, full)
            if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
                return fut
            if error != E.NONE:
                for m in group.members.values():
                    m.assignment = b""
                    m.complete_sync(SyncResult(error))
                self._prepare_rebalance(group, f"storing the assignment failed: {error.name}")
                return fut
            for mid, m in group.members.items():
                m.assignment = full[mid]
            group.sync_deadline_ms = -1
            group.transition_to(GroupState.STABLE, self._wall())
            log.info("group %s: stable at generation %d", group.group_id, group.generation_id)
            for m in group.members.values():
                m.complete_sync(SyncResult(E.NONE, group.protocol_type, group.protocol_name, m.assignment))
            self._schedule_group(group)  # sessions of members that were parked in SyncGroup run again
        return fut

    # ----------------------------------------------------------------------------------------- Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        group = self.manager.get_group(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, group_instance_id):
            return E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        # Not rescheduled: a heartbeat only moves the deadline later, and the member's heartbeat operation
        # schedules itself again for the new one when it runs (OffsetCommit refreshes the same way).
        member.last_heartbeat_ms = self._now()
        if group.is_(GroupState.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ---------------------------------------------------------------------------------------- LeaveGroup
    def leave_group(self, group_id: str, members: list[LeaveMember]) -> tuple[int, list[int]]:
        """(top-level error, per-member errors) as LeaveGroup v3+ reports them."""
        group = self.manager.get_group(group_id)
        if group is None:
            return E.NONE, [E.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, [E.NONE] * len(members)
        errors: list[int] = []
        for leaving in members:
            member_id = leaving.member_id
            if not member_id and leaving.group_instance_id is not None:
                # admin removal by instance id (KIP-345): look the member up
                member_id = group.static_member_id(leaving.group_instance_id) or ""
                if not member_id:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
            if group.is_fenced(member_id, leaving.group_instance_id):
                errors.append(E.FENCED_INSTANCE_ID)
            elif group.is_pending(member_id):
                del group.pending_members[member_id]
                self._try_complete_join(group)
                errors.append(E.NONE)
            elif (member := group.members.get(member_id)) is None:
                errors.append(E.UNKNOWN_MEMBER_ID)
            else:
                self._remove_member_and_update(group, member, "member left the group")
                errors.append(E.NONE)
        return E.NONE, errors

    # -------------------------------------------------------------------------------------- OffsetCommit
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata],
                       unknown_group_error: int = E.ILLEGAL_GENERATION) -> dict[TopicPartition, int]:
        """Per-partition errors. `offsets` carry the commit timestamp; too-long metadata is rejected here."""
        error = self._validate_commit(group_id, member_id, group_instance_id, generation_id,
                                      unknown_group_error)
        if error != E.NONE:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        assert group is not None
        result, valid = self._split_oversized_metadata(offsets)
        if valid:
            store_error = self.manager.store_offsets(group, valid)
            result.update(dict.fromkeys(valid, store_error))
        return result

    def _split_oversized_metadata(self, offsets: dict[TopicPartition, OffsetAndMetadata]
                                  ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetAndMetadata]]:
        """(OFFSET_METADATA_TOO_LARGE for each commit over offset.metadata.max.bytes, the commits to store)."""
        result: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                result[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        return result, valid

    def _validate_commit(self, group_id: str, member_id: str, instance_id: str | None,
                         generation_id: int, unknown_group_error: int) -> int:
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id < 0:
                # commits from a client that does not use group management ("simple" group)
                self.manager.add_group(GroupMetadata(group_id, state_timestamp_ms=self._wall()))
                return E.NONE
            return unknown_group_error
        if group.is_(GroupState.DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            # ClassicGroup.validateOffsetCommit: an admin client or a consumer outside group management (which
            # may still send a member id of its own, as librdkafka's assign()-only consumers do)
            return E.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            if group.is_fenced(member_id, instance_id):
                return E.FENCED_INSTANCE_ID
            member = group.members.get(member_id)
            if member is None:
                return E.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return E.ILLEGAL_GENERATION
            member.last_heartbeat_ms = self._now()
        elif not group.is_(GroupState.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ---------------------------------------------------------------------------------- TxnOffsetCommit
    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: str | None, generation_id: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """Stage the offsets of a transaction (Kafka's GroupCoordinator.handleTxnCommitOffsets). KIP-447: a
        producer passing the consumer's generation/member id is fenced like an OffsetCommit from that member.
        The offsets become visible when the transaction's marker reaches `__consumer_offsets`."""
        if not group_id:
            return dict.fromkeys(offsets, E.INVALID_GROUP_ID)
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, state_timestamp_ms=self._wall()))
        if group.is_(GroupState.DEAD):
            error: int = E.COORDINATOR_NOT_AVAILABLE
        elif generation_id < 0 and group.is_(GroupState.EMPTY):
            error = E.NONE
        elif group.is_fenced(member_id, group_instance_id):
            error = E.FENCED_INSTANCE_ID
        elif member_id and not group.has_member(member_id):
            error = E.UNKNOWN_MEMBER_ID
        elif generation_id >= 0 and generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        else:
            error = E.NONE
        if error != E.NONE:
            return dict.fromkeys(offsets, error)
        result, valid = self._split_oversized_metadata(offsets)
        if valid:
            store_error = self.manager.store_txn_offsets(group, producer_id, producer_epoch, valid)
            result.update(dict.fromkeys(valid, store_error))
        return result

    def on_transaction_completed(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to `__consumer_offsets` partition `offsets_partition`."""
        self.manager.complete_txn_offsets(offsets_partition, producer_id, commit)

    # --------------------------------------------------------------------------------------- OffsetFetch
    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        """(group error, offsets); None = no committed offset. `partitions=None` means every committed one."""
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.NONE, ({} if partitions is None else dict.fromkeys(partitions))
        if partitions is None:
            return E.NONE, dict(group.offsets)
        return E.NONE, {tp: group.offsets.get(tp) for tp in partitions}

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        """KIP-447: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for such a partition."""
        group = self.manager.get_group(group_id)
        return group is not None and group.has_pending_txn_offsets(tp)

    # -------------------------------------------------------------------------------- admin operations
    # Each admin operation first applies every deadline that has passed, so its answer never depends on
    # whether the expiry timer has fired yet: a group whose last member's session ran out at this very
    # millisecond is already empty (Kafka's timing wheel has expired it by then).
    def list_groups(self) -> list[GroupMetadata]:
        self.check_expirations()
        return [g for g in self.manager.groups.values() if not g.is_(GroupState.DEAD)]

    def describe_group(self, group_id: str) -> GroupMetadata | None:
        self.check_expirations()
        group = self.manager.get_group(group_id)
        return None if group is None or group.is_(GroupState.DEAD) else group

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        self.check_expirations()
        result: dict[str, int] = {}
        for group_id in group_ids:
            group = self.manager.get_group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                result[group_id] = E.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                result[group_id] = E.NON_EMPTY_GROUP
            else:
                result[group_id] = self.manager.delete_group(group)
        return result

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                       ) -> tuple[int, dict[TopicPartition, int]]:
        self.check_expirations()
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return E.GROUP_ID_NOT_FOUND, {}
        if group.protocol_type == "consumer" and group.members:
            subscribed = group.subscribed_topics() or set()
        elif not group.protocol_type or not group.members:
            subscribed = set()
        else:
            return E.NON_EMPTY_GROUP, {}
        errors = {tp: int(E.GROUP_SUBSCRIBED_TO_TOPIC) for tp in partitions if tp.topic in subscribed}
        deletable = [tp for tp in partitions if tp not in errors]
        error = self.manager.delete_offsets(group, deletable)
        errors.update(dict.fromkeys(deletable, int(error)))
        return E.NONE, errors

    # ------------------------------------------------------------------------------------------ timers
    def check_expirations(self) -> None:
        """Apply every deadline that has passed on the injected clock (the timer's due operations)."""
        self.timer.run_due()

    def _schedule_group(self, group: GroupMetadata) -> None:
        """Schedule every deadline `group` has now: its join or sync deadline, pending members, sessions."""
        if group.is_(GroupState.PREPARING_REBALANCE):
            due = group.initial_delay_deadline_ms if group.initial_delay_deadline_ms >= 0 else group.join_deadline_ms
            if due >= 0:
                self.timer.schedule(("join", group.group_id), due, lambda: self._on_join_deadline(group.group_id))
        if group.is_(GroupState.COMPLETING_REBALANCE) and group.sync_deadline_ms >= 0:
            self.timer.schedule(("sync", group.group_id), group.sync_deadline_ms,
                                lambda: self._on_sync_deadline(group.group_id))
        for member_id in group.pending_members:
            self._schedule_pending(group, member_id)
        for m in group.members.values():
            self._schedule_heartbeat(group, m)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group_id, member_id = group.group_id, member.member_id
        self.timer.schedule(("heartbeat", group_id, member_id), member.last_heartbeat_ms + member.session_timeout_ms,
                            lambda: self._on_heartbeat_deadline(group_id, member_id))

    def _schedule_pending(self, group: GroupMetadata, member_id: str) -> None:
        group_id = group.group_id
        self.timer.schedule(("pending", group_id, member_id), group.pending_members[member_id],
                            lambda: self._on_pending_deadline(group_id, member_id))

    def _schedule_retention_check(self) -> None:
        self.timer.schedule(("offsets-retention",), self._now() + self.config.offsets_retention_check_interval_ms,
                            self._on_retention_check)

    def _on_heartbeat_deadline(self, group_id: str, member_id: str) -> None:
        """Kafka's onExpireHeartbeat: the member's session ran out unless a parked JoinGroup or SyncGroup keeps it
        alive (shouldKeepAlive; the group schedules its sessions again when those calls end)."""
        group = self.manager.get_group(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or member.is_awaiting_join or member.is_awaiting_sync:
            return
        if self._now() < member.last_heartbeat_ms + member.session_timeout_ms:
            self._schedule_heartbeat(group, member)  # it heartbeated since
        else:
            self._remove_member_and_update(group, member, "session timeout expired")

    def _on_pending_deadline(self, group_id: str, member_id: str) -> None:
        group = self.manager.get_group(group_id)
        expiry = None if group is None else group.pending_members.get(member_id)
        if group is None or expiry is None:
            return
        if self._now() < expiry:
            self._schedule_pending(group, member_id)
            return
        del group.pending_members[member_id]
        log.info("group %s: pending member %s expired", group.group_id, member_id)
        self._try_complete_join(group)

    def _on_join_deadline(self, group_id: str) -> None:
        """The rebalance timeout, or the end of the group.initial.rebalance.delay.ms window (InitialDelayedJoin:
        extended while new members keep arriving, never past the rebalance timeout)."""
        group = self.manager.get_group(group_id)
        if group is None or not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = self._now()
        if group.initial_delay_deadline_ms >= 0:
            if now < group.initial_delay_deadline_ms:
                self._schedule_group(group)
            elif group.new_member_added and group.initial_delay_deadline_ms < group.initial_delay_max_ms:
                group.new_member_added = False
                group.initial_delay_deadline_ms = min(now + self.config.group_initial_rebalance_delay_ms,
                                                      group.initial_delay_max_ms)
                self._schedule_group(group)
            else:
                self._complete_join(group)
        elif group.join_deadline_ms >= 0:
            if now < group.join_deadline_ms:
                self._schedule_group(group)
            else:
                self._complete_join(group)

    def _on_sync_deadline(self, group_id: str) -> None:
        group = self.manager.get_group(group_id)
        if group is None or not group.is_(GroupState.COMPLETING_REBALANCE) or group.sync_deadline_ms < 0:
            return
        if self._now() < group.sync_deadline_ms:
            self._schedule_group(group)
            return
        group.sync_deadline_ms = -1
        missing = [m for m in group.members.values() if not m.is_awaiting_sync]
        for m in missing:
            # KIP-732-like pending-sync timeout: whoever never sent SyncGroup is dropped
            self._remove_member_and_update(group, m, "did not send SyncGroup within the rebalance timeout")
        if missing and group.is_(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, "members missing at sync")

    def _on_retention_check(self) -> None:
        self._schedule_retention_check()
        self.manager.cleanup_expired_offsets()
