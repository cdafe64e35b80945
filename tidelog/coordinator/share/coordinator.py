"""The share-group coordinator and share-partition manager of this node (KIP-932): Kafka's GroupMetadataManager
(share part), SharePartitionManager and share coordinator in one, as one node plays all three.

* Membership (ShareGroupHeartbeat): `heartbeat`, with member sessions timing out on the injectable clock,
  checked whenever the coordinator is used (an expired member is removed as Kafka's session timer would).
* Share-partitions: created at the first ShareFetch of a (group, partition), the start offset then chosen by the
  group's share.auto.offset.reset (Kafka resolves it lazily too); `acquire` / `acknowledge` / `release_member`.
* Persistence: tidelog.coordinator.share.state_store, written off the event loop (changes close together share one
  write); a request that changed the state is answered once `durable()` says it is on disk.

Differences from Kafka, all invisible to clients: a subscribed partition is assignable at once (Kafka's group
coordinator first initializes its share state and assigns it a heartbeat later); members are not persisted (after
a restart they rejoin: a heartbeat from an unknown member gets UNKNOWN_MEMBER_ID and the client joins again with
the same member id); a record about to reach the delivery limit is not delivered alone (Kafka's poison-record
throttling).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.coordinator.java_duration import duration_ms
from tidelog.coordinator.share.share_group import ShareGroup, ShareMember, simple_assign
from tidelog.coordinator.share.share_partition import (
    AbortedRanges,
    AcknowledgementBatch,
    AcquiredRange,
    AcquireLimits,
    SharePartition,
    batch_headers,
    slice_batches,
)
from tidelog.coordinator.share.state_store import ShareStateStore
from tidelog.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from tidelog.broker.topics import TopicManager
    from tidelog.clock import Clock
    from tidelog.coordinator.group.group_config import GroupConfigManager
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # KafkaApis: a share member id is a UUID string the client chose


@dataclass(frozen=True)
class ShareGroupConfig:
    """group.share.* broker configs."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000

    @classmethod
    def from_broker_config(cls, config: Any) -> ShareGroupConfig:
        return cls(int(config.get("group.share.session.timeout.ms")),
                   int(config.get("group.share.heartbeat.interval.ms")),
                   int(config.get("group.share.max.size")),
                   int(config.get("group.share.record.lock.duration.ms")),
                   int(config.get("group.share.delivery.count.limit")),
                   int(config.get("group.share.partition.max.record.locks")),
                   int(config.get("group.share.max.share.sessions")))


@dataclass
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[bytes, set[int]] | None  # None: unchanged, not sent


@dataclass
class Acquired:
    """One partition's part of a ShareFetch answer."""

    records: bytes
    ranges: list[AcquiredRange]


class HeartbeatError(KafkaError):
    pass


def _is_read_committed(level: object) -> bool:
    return str(level) == "read_committed"


class ShareGroupCoordinator:
    def __init__(self, topics: TopicManager, clock: Clock, config: ShareGroupConfig, store: ShareStateStore,
                 group_configs: Callable[[], GroupConfigManager] | None,
                 other_group_type: Callable[[str], str | None]) -> None:
        self.topics = topics
        self.clock = clock
        self.config = config
        self.store = store
        self._group_configs = group_configs
        self._other_group_type = other_group_type  # "classic" / "consumer" when another coordinator has the id
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[str, dict[tuple[bytes, int], SharePartition]] = {}
        # (topic id, partition) whose records may be acquirable again (released, acknowledged): the broker wakes
        # the ShareFetches waiting on it (Kafka's completeDelayedShareFetchRequest after an acknowledgement or a
        # release); lock timeouts end those waits through `next_lock_deadline`
        self.on_available: Callable[[bytes, int], None] | None = None

    # --- start-up and persistence ----------------------------------------------------------------------------

    def load(self) -> None:
        for group_id, (epoch, partitions) in self.store.load().items():
            self.groups[group_id] = ShareGroup(group_id, group_epoch=epoch, assignment_epoch=0)
            self.partitions[group_id] = {(sp.topic_id, sp.partition): sp for sp in partitions}
        if self.groups:
            log.info("loaded %d share group(s)", len(self.groups))

    def _save(self) -> None:
        """The state changed: every group's state is written soon, off the loop, and the start offsets and counts
        DescribeShareGroupOffsets reports follow once it is on disk. The state of a deleted topic goes with it
        (Kafka's share coordinator deletes it when the topic goes)."""
        for parts in self.partitions.values():
            for key in [k for k in parts if self.topics.by_id(k[0]) is None]:
                del parts[key]
        self.store.save(self._state)

    def _state(self) -> dict[str, tuple[int, list[SharePartition]]]:
        return {gid: (g.group_epoch, list(self.partitions.get(gid, {}).values())) for gid, g in self.groups.items()}

    async def durable(self) -> None:
        """Until every change made so far is on disk; KafkaError UNKNOWN_SERVER_ERROR if the write that was to
        carry it failed (the state stays as changed in memory and the writer retries it)."""
        try:
            await self.store.durable()
        except Exception as exc:  # an OSError, or a bug (a hook, the snapshot, on_written): the writer logged it
            text = str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot write the share-group state: {text}") from exc

    async def settled(self) -> None:
        """`durable()` for an answer that does not depend on the write (a fetch after lock expiry, a session
        close): a failure, logged by the writer, is retried by it."""
        try:
            await self.store.durable()
        except Exception:  # logged once per failure streak by the writer, which retries it
            pass

    def shutdown(self) -> None:
        """Broker shutdown: what the last changes left unwritten goes to disk now."""
        self.store.flush()

    # --- group configs ----------------------------------------------------------------------------------------

    def _config(self, group_id: str) -> dict[str, int | str]:
        if self._group_configs is None:
            return {"share.session.timeout.ms": self.config.session_timeout_ms,
                    "share.heartbeat.interval.ms": self.config.heartbeat_interval_ms,
                    "share.record.lock.duration.ms": self.config.record_lock_duration_ms,
                    "share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted",
                    "share.delivery.count.limit": self.config.delivery_count_limit,
                    "share.partition.max.record.locks": self.config.partition_max_record_locks}
        return self._group_configs().values(group_id)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self._config(group_id)["share.record.lock.duration.ms"])

    # --- membership (ShareGroupHeartbeat) --------------------------------------------------------------------

    def is_share_group(self, group_id: str) -> bool:
        return group_id in self.groups

    def heartbeat(self, group_id: str, member_id: str, epoch: int, rack_id: str | None,
                  subscribed: list[str] | None, client_id: str, client_host: str) -> HeartbeatResult:
        """One ShareGroupHeartbeat (GroupMetadataManager.shareGroupHeartbeat); raises HeartbeatError."""
        _validate(group_id, member_id, epoch, rack_id, subscribed)
        self.expire_members()
        if epoch == LEAVE_EPOCH:
            return self._leave(group_id, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if self._other_group_type(group_id) is not None:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            if epoch != 0:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
            self.groups[group_id] = group
            self.partitions.setdefault(group_id, {})
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The share group has reached its maximum capacity of {self.config.max_size} "
                                     "members.")
            member = ShareMember(member_id)
            group.members[member_id] = member
        elif epoch not in (member.member_epoch, member.previous_member_epoch):
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The share group member has epoch {epoch} but the group coordinator has "
                                 f"{member.member_epoch}.")
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        bump = False  # one group epoch per heartbeat, whatever changed (GroupMetadataManager.shareGroupHeartbeat)
        if subscribed is not None and tuple(sorted(set(subscribed))) != member.subscribed:
            member.subscribed = tuple(sorted(set(subscribed)))
            bump = True
        metadata = self._metadata(group)
        if metadata != group.metadata:
            group.metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            topics = {name: (topic_id, count) for name, topic_id, count in metadata}
            group.target = simple_assign({m.member_id: m.subscribed for m in group.members.values()}, topics,
                                         group.target)
            group.assignment_epoch = group.group_epoch
            self._save()  # the group and its epoch are durable (Kafka's share group records)
        changed = False
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
            target = group.target.get(member_id, {})
            if target != member.assigned:
                member.assigned = {t: set(ps) for t, ps in target.items()}
                changed = True
        config = self._config(group_id)
        member.session_deadline_ms = self.clock.milliseconds() + int(config["share.session.timeout.ms"])
        send = epoch == 0 or subscribed is not None or changed
        return HeartbeatResult(member_id, member.member_epoch, int(config["share.heartbeat.interval.ms"]),
                               {t: set(ps) for t, ps in member.assigned.items()} if send else None)

    def _leave(self, group_id: str, member_id: str) -> HeartbeatResult:
        group = self.groups.get(group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        if member_id not in group.members:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
        self._remove_member(group, member_id)
        return HeartbeatResult(member_id, LEAVE_EPOCH, 0, None)

    def _remove_member(self, group: ShareGroup, member_id: str) -> None:
        """Leave or session timeout: the group epoch moves and the others take over its partitions on their
        next heartbeat. Its acquired records stay locked until its share session closes or the locks time out,
        as in Kafka."""
        del group.members[member_id]
        group.target.pop(member_id, None)
        group.group_epoch += 1
        self._save()

    def expire_members(self) -> None:
        now = self.clock.milliseconds()
        for group in self.groups.values():
            for member in [m for m in group.members.values() if m.session_deadline_ms <= now]:
                log.info("Share group %s: member %s left after its session timed out", group.group_id,
                         member.member_id)
                self._remove_member(group, member.member_id)

    def _metadata(self, group: ShareGroup) -> tuple[tuple[str, bytes, int], ...]:
        out = []
        for name in sorted(group.subscribed_topics()):
            info = self.topics.get(name)
            if info is not None:
                out.append((name, bytes(info.topic_id), info.partitions))
        return tuple(out)

    # --- describe, list, delete ---------------------------------------------------------------------------------

    def describe(self, group_id: str) -> ShareGroup | None:
        self.expire_members()
        return self.groups.get(group_id)

    def list_groups(self) -> list[ShareGroup]:
        self.expire_members()
        return [self.groups[g] for g in sorted(self.groups)]

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups: an empty share group and all its share-partition state."""
        self.expire_members()
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        self.partitions.pop(group_id, None)
        self._save()
        return ErrorCode.NONE

    # --- share-partitions (ShareFetch / ShareAcknowledge) -----------------------------------------------------

    def share_partition(self, group_id: str, topic_id: bytes, partition: int, log_obj: Log) -> SharePartition:
        """The group's share-partition, created at its first fetch with the start offset the group's
        share.auto.offset.reset gives (SharePartition.startOffsetDuringInitialization: latest = the high
        watermark, earliest = the log start, by_duration = the first record at or after now - duration;
        OFFSET_NOT_AVAILABLE when there is none)."""
        if group_id not in self.groups:
            # Kafka's share coordinator: the group coordinator initializes a partition's state when a member of
            # the group subscribes to its topic; without that the read fails (UNKNOWN_SERVER_ERROR)
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "Read operation on uninitialized share partition not allowed.")
        parts = self.partitions.setdefault(group_id, {})
        sp = parts.get((topic_id, partition))
        if sp is None:
            start = self._initial_offset(group_id, log_obj)
            sp = SharePartition(group_id, topic_id, partition, start, start)
            parts[(topic_id, partition)] = sp
        sp.move_start(log_obj.log_start_offset)
        return sp

    def _initial_offset(self, group_id: str, log_obj: Log) -> int:
        reset = str(self._config(group_id)["share.auto.offset.reset"]).strip().lower()
        if reset == "earliest":
            return int(log_obj.log_start_offset)
        if reset.startswith("by_duration:"):
            # a duration longer than the time since the epoch: from the first record
            found = log_obj.fetch_offset_for_timestamp(max(0, self.clock.milliseconds() - duration_ms(reset[12:])))
            if found is None:
                raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE, "No record at or after the share group's duration")
            return int(found[1])
        return int(log_obj.high_watermark)

    def acquire(self, group_id: str, member_id: str, topic_id: bytes, partition: int, log_obj: Log,
                max_records: int, max_bytes: int, mode: int, batch_size: int) -> Acquired:
        """Acquire up to `max_records` of the partition for the member and the log batches holding them."""
        sp = self.share_partition(group_id, topic_id, partition, log_obj)
        config = self._config(group_id)
        limit = int(config["share.delivery.count.limit"])
        max_locks = int(config["share.partition.max.record.locks"])
        now = self.clock.milliseconds()
        if sp.expire_locks(now, limit):
            self._save()  # Kafka writes lock-timeout transitions too
        if not sp.can_acquire(max_locks) or max_records <= 0:
            return Acquired(b"", [])
        committed = _is_read_committed(config["share.isolation.level"])
        bound = log_obj.last_stable_offset if committed else log_obj.high_watermark
        start = sp.first_fetch_offset()
        if start >= bound:
            return Acquired(b"", [])
        data = log_obj.read(start, max(1, max_bytes), bound, True)
        aborted = None
        if committed:
            txns = log_obj.collect_aborted_transactions(start, bound)
            aborted = AbortedRanges(tuple((t.producer_id, t.first_offset, t.last_offset) for t in txns))
        limits = AcquireLimits(max_records, max_locks,
                               int(config["share.record.lock.duration.ms"]), limit, mode)
        ranges = sp.acquire(member_id, batch_headers(data), bound, now, limits, aborted, batch_size)
        if not ranges:
            return Acquired(b"", [])
        return Acquired(slice_batches(data, ranges[0].first_offset, ranges[-1].last_offset), ranges)

    async def acknowledge(self, group_id: str, member_id: str,
                          acks: dict[tuple[bytes, int], list[AcknowledgementBatch]]
                          ) -> dict[tuple[bytes, int], tuple[ErrorCode, str | None]]:
        """A member's acknowledgements, per partition all or none, answered once on disk (Kafka's SharePartition
        completes an acknowledgement when the share coordinator's write succeeds). A failed write answers the
        applied partitions UNKNOWN_SERVER_ERROR (Kafka's persister error) but, unlike Kafka, keeps the change in
        memory for the next write to carry: other requests may have changed the partition while this one waited,
        and Kafka's guard for an exact rollback (records in transition cannot be acquired) is not kept here."""
        now = self.clock.milliseconds()
        config = self._config(group_id)
        limit = int(config["share.delivery.count.limit"])
        lock_ms = int(config["share.record.lock.duration.ms"])
        results: dict[tuple[bytes, int], tuple[ErrorCode, str | None]] = {}
        expired = False
        for key, batches in acks.items():
            sp = self.partitions.get(group_id, {}).get(key)
            if sp is None:
                results[key] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state on this broker")
                continue
            expired = sp.expire_locks(now, limit) or expired
            results[key] = sp.acknowledge(member_id, batches, limit, now, lock_ms)
        applied = [key for key, (code, _) in results.items() if code == ErrorCode.NONE]
        if applied or expired:
            self._save()
            try:
                await self.durable()
            except KafkaError as e:
                for key in applied:
                    results[key] = (e.code, e.message)
        self._available(applied)
        return results

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member's share session closed: every record it holds in the group is available again."""
        released = [key for key, sp in self.partitions.get(group_id, {}).items() if sp.release_member(member_id)]
        if released:
            self._save()  # released in memory at once; a failed write is retried by the writer, as Kafka keeps a
            # timed-out lock's release
        self._available(released)

    def _available(self, keys: list[tuple[bytes, int]]) -> None:
        if self.on_available is not None:
            for topic_id, partition in keys:
                self.on_available(topic_id, partition)

    def next_lock_deadline(self, group_id: str, keys: list[tuple[bytes, int]]) -> int | None:
        """When the first acquisition lock on these partitions of the group times out (the broker clock's ms),
        None when none is held: a ShareFetch waiting on them wakes then (Kafka's lock-timeout task completes the
        delayed share fetch)."""
        parts = self.partitions.get(group_id, {})
        deadlines = [d for key in keys if (sp := parts.get(key)) is not None
                     and (d := sp.next_lock_deadline()) is not None]
        return min(deadlines) if deadlines else None

    # --- share group offsets (Describe/Alter/DeleteShareGroupOffsets) -----------------------------------------

    def start_offsets(self, group_id: str) -> dict[tuple[bytes, int], int]:
        """(topic id, partition) -> the persisted start offset (-1 before the first write), for the group's
        initialized partitions."""
        return {key: sp.persisted_start for key, sp in self.partitions.get(group_id, {}).items()}

    def state_summaries(self, group_id: str) -> dict[tuple[bytes, int], tuple[int, int]]:
        """(topic id, partition) -> (start offset, DeliveryCompleteCount) as last written together (Kafka's
        ReadShareGroupStateSummary): the lag DescribeShareGroupOffsets computes from them is consistent whatever
        the partition did in memory since."""
        return {key: (sp.persisted_start, sp.persisted_done) for key, sp in self.partitions.get(group_id, {}).items()}

    def alter_start_offsets(self, group_id: str, offsets: dict[tuple[bytes, int], int]) -> None:
        """AlterShareGroupOffsets on an empty (or new) share group: fresh state at each given start offset."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        parts = self.partitions.setdefault(group_id, {})
        for (topic_id, partition), offset in offsets.items():
            sp = parts.get((topic_id, partition))
            if offset < 0:
                # -1: no start offset (Kafka's uninitialized state): the next fetch takes share.auto.offset.reset
                parts.pop((topic_id, partition), None)
                continue
            if sp is None:
                parts[(topic_id, partition)] = SharePartition(group_id, topic_id, partition, offset, offset,
                                                              state_epoch=group.group_epoch)
            else:
                sp.reset(offset)
        self._save()

    def other_group_type(self, group_id: str) -> str | None:
        """"classic" / "consumer" when another coordinator has a group of this id (Kafka's "is not a share
        group"), else None."""
        return self._other_group_type(group_id)


    def delete_topic_state(self, group_id: str, topic_id: bytes) -> bool:
        """DeleteShareGroupOffsets of one topic: its partitions start again from share.auto.offset.reset."""
        parts = self.partitions.get(group_id, {})
        keys = [k for k in parts if k[0] == topic_id]
        for key in keys:
            del parts[key]
        if keys:
            self._save()
        return bool(keys)


def _validate(group_id: str, member_id: str, epoch: int, rack_id: str | None, subscribed: list[str] | None) -> None:
    """KafkaApis and GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid, in their order."""
    def invalid(message: str) -> HeartbeatError:
        return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

    if not member_id or len(member_id) > MAX_MEMBER_ID_LENGTH:
        raise invalid("Invalid member id in the request.") if member_id else invalid("MemberId can't be empty.")
    if not group_id:
        raise invalid("GroupId can't be empty.")
    if rack_id is not None and not rack_id:
        raise invalid("RackId can't be empty.")
    if epoch == 0 and not subscribed:
        raise invalid("SubscribedTopicNames must be set in first request.")
    if epoch < LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")
