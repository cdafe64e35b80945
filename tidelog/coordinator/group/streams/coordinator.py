"""KIP-1071 streams groups: StreamsGroupHeartbeat, StreamsGroupDescribe and the streams side of OffsetCommit,
OffsetFetch, ListGroups and DeleteGroups, as Kafka's GroupMetadataManager.streamsGroupHeartbeat does them.

A heartbeat validates the request, gets or creates the group and member (a member id is the client's own),
checks the member epoch (a lost response is tolerated at the previous epoch, as for KIP-848), sets the group's
topology from a joining member when the group has none or is otherwise empty, or when it carries a higher
topology epoch (the other members are told STALE_TOPOLOGY until they rejoin with it), configures it against the
topics that exist (internal topics are created, as Kafka's coordinator asks the broker to), bumps the group epoch
when membership, topology, topic metadata or a member's assignment-relevant metadata changed, computes a new
target assignment with the sticky task assignor when the group epoch is ahead of the assignment epoch, and
reconciles the member towards it (group.py).

The groups live in `tidelog-streams-groups.json` (tidelog/metadata/files.py), written off the event loop after a
change (changes close together in one write) and on disk before the answer; Kafka keeps the same state as records
in `__consumer_offsets`. Committed offsets live where the
classic coordinator keeps them (an offsets-only group of the same id), so OffsetFetch and retention work
unchanged. Session and rebalance deadlines are keys on the group coordinator's DeadlineTimer, on the injected
Clock (Kafka's streamsGroupSessionTimeoutKey / streamsGroupRebalanceTimeoutKey); a restart gives every member a
fresh session.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidelog.clock import Clock
from tidelog.coordinator.group.classic.group import GroupMetadata, OffsetAndMetadata
from tidelog.coordinator.group.offset_validation import txn_offset_commit_error
from tidelog.coordinator.group.streams import topology as tp
from tidelog.coordinator.group.streams.assignor import AssignmentMember, Tasks, TasksTuple, assign
from tidelog.coordinator.group.streams.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    MemberState,
    StreamsGroup,
    StreamsGroupMember,
    ids,
    reconcile,
    tuple_equal,
)
from tidelog.coordinator.timer import DeadlineTimer
from tidelog.metadata.files import STREAMS_GROUPS
from tidelog.metadata.writer import CoalescingWriter
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import TopicPartition

log = logging.getLogger(__name__)
# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH, the cap of one CreateTopics request: a topology cannot
# have the broker create more partitions than that in one heartbeat.
MAX_INTERNAL_TOPIC_PARTITIONS = 10_000
E = ErrorCode
STICKY_ASSIGNOR_NAME = "sticky"  # Kafka's StickyTaskAssignor.STICKY_ASSIGNOR_NAME
# What the response tells the client's warm-up logic and task-offset reporting: Kafka Streams' own defaults
# (acceptable.recovery.lag 10000, a 60 s task offset interval) as Kafka's coordinator answers them.
ACCEPTABLE_RECOVERY_LAG = 10_000
TASK_OFFSET_INTERVAL_MS = 60_000
_FENCE_RETRY_MS = 10


@dataclass(slots=True)
class StreamsGroupConfig:
    """group.streams.* broker configs (Kafka's GroupCoordinatorConfig) and whether "streams" is served."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    num_standby_replicas: int = 0
    max_size: int = 2**31 - 1
    rack_aware_assignment_tags: tuple[str, ...] = ()
    enabled: bool = True
    initial_rebalance_delay_ms: int = 3_000

    @classmethod
    def from_broker_config(cls, config: Any) -> StreamsGroupConfig:
        getter = getattr(config, "get", None)
        if not callable(getter):
            return cls()

        def value(name: str, default: Any) -> Any:
            try:
                v = getter(name)
            except (KeyError, AttributeError):
                return default
            return default if v is None else v

        protocols = value("group.coordinator.rebalance.protocols", ["classic", "consumer", "streams"])
        return cls(int(value("group.streams.session.timeout.ms", 45_000)),
                   int(value("group.streams.heartbeat.interval.ms", 5_000)),
                   int(value("group.streams.num.standby.replicas", 0)),
                   int(value("group.streams.max.size", 2**31 - 1)),
                   tuple(value("group.streams.rack.aware.assignment.tags", [])), "streams" in protocols,
                   int(value("group.streams.initial.rebalance.delay.ms", 3_000)))


@dataclass
class HeartbeatResult:
    member: StreamsGroupMember
    heartbeat_interval_ms: int
    send_tasks: bool
    status: list[tuple[int, str]]
    endpoint_epoch: int
    endpoints: list[tuple[tuple[str, int], dict[str, set[int]], dict[str, set[int]]]] | None = field(default=None)


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


class StreamsGroupStore:
    """Every streams group in one metadata document, replaced atomically off the event loop: `save` notes a
    change, and changes noted close together are written once (latest state wins, metadata.writer)."""

    def __init__(self, log_dir: str | Path | None, fault_hooks: Any = None) -> None:
        self.log_dir = None if log_dir is None else Path(log_dir)
        self._groups: dict[str, StreamsGroup] = {}
        self.writer = None if self.log_dir is None else \
            CoalescingWriter(STREAMS_GROUPS, self.log_dir, self._document, fault_hooks)

    def load(self) -> dict[str, StreamsGroup]:
        if self.log_dir is None:
            return {}
        doc = STREAMS_GROUPS.read(self.log_dir, lambda d: {gid: StreamsGroup.from_json(gid, g)
                                                           for gid, g in d["groups"].items()})
        return doc or {}

    def save(self, groups: dict[str, StreamsGroup]) -> None:
        """`groups` changed: written soon, off the loop (`durable()` waits for it)."""
        self._groups = groups
        if self.writer is not None:
            self.writer.changed()

    async def durable(self) -> None:
        """Every change saved so far is on disk (the exception of the write that was to carry it, if it failed:
        the writer retries it)."""
        if self.writer is not None:
            await self.writer.durable()

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def _document(self) -> dict[str, Any]:
        return {"groups": {gid: g.to_json() for gid, g in self._groups.items()}}


class StreamsGroupCoordinator:
    def __init__(self, classic: Any, topics: Any, clock: Clock, config: StreamsGroupConfig,
                 store: StreamsGroupStore, group_configs: Callable[[], Any] | None = None,
                 other_group_type: Callable[[str], str | None] | None = None) -> None:
        self.classic = classic  # the classic GroupCoordinator: committed offsets
        self.topics = topics
        self.clock = clock
        self.config = config
        self.store = store
        self._group_configs = group_configs
        self._other_group_type = other_group_type
        self.groups: dict[str, StreamsGroup] = {}
        shared = getattr(classic, "timer", None)
        self.timer: DeadlineTimer = shared if isinstance(shared, DeadlineTimer) else \
            DeadlineTimer(clock.monotonic_ms, "streams group coordinator")
        if shared is not self.timer:
            self.timer.start()

    def load(self) -> None:
        """The saved groups, each member with a fresh session (the group coordinator's startup)."""
        self.groups = self.store.load()
        now = self._now()
        for group in self.groups.values():
            self._refresh_topology(group)
            for member in group.members.values():
                member.session_deadline_ms = now + self._session_timeout(group.group_id)
                self._schedule(group.group_id, member)
        if self.groups:
            log.info("loaded %d streams group(s)", len(self.groups))

    def _now(self) -> int:
        return self.clock.monotonic_ms()

    def is_streams_group(self, group_id: str) -> bool:
        return group_id in self.groups

    # ------------------------------------------------------------------------------------------ configs
    def _group_int(self, group_id: str, name: str, default: int) -> int:
        if self._group_configs is None:
            return default
        own = self._group_configs().overrides(group_id)
        return int(own[name]) if name in own else default

    def _session_timeout(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.session.timeout.ms", self.config.session_timeout_ms)

    def _heartbeat_interval(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    def _num_standby(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.num.standby.replicas", self.config.num_standby_replicas)

    # ---------------------------------------------------------------------------------------- heartbeat
    @staticmethod
    def validate(request: Any) -> None:
        """GroupCoordinatorService: throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures, then
        throwIfStreamsGroupHeartbeatRequestIsInvalid (with throwIfInvalidTopology), in Kafka's order."""
        if request.topology is not None:
            for s in request.topology.subtopologies or []:
                if s.source_topic_regex:
                    raise HeartbeatError(E.INVALID_REQUEST, "Regular expressions for source topics are not "
                                         "supported yet.")
        if not request.member_id:
            raise HeartbeatError(E.INVALID_REQUEST, "MemberId can't be empty.")
        if not request.group_id:
            raise HeartbeatError(E.INVALID_REQUEST, "GroupId can't be empty.")
        if request.instance_id is not None and request.instance_id == "":
            raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be empty.")
        if request.rack_id is not None and request.rack_id == "":
            raise HeartbeatError(E.INVALID_REQUEST, "RackId can't be empty.")
        epoch = request.member_epoch
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise HeartbeatError(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            for name, label in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"),
                                ("warmup_tasks", "WarmupTasks")):
                if getattr(request, name):
                    raise HeartbeatError(E.INVALID_REQUEST, f"{label} must be empty when (re-)joining.")
            if request.topology is None:
                raise HeartbeatError(E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
            for s in request.topology.subtopologies or []:
                for t in s.state_changelog_topics or []:
                    if t.partitions != 0:
                        raise HeartbeatError(E.STREAMS_INVALID_TOPOLOGY, f"Changelog topic {t.name} must have an "
                                             f"undefined partition count, but it is set to {t.partitions}.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise HeartbeatError(E.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise HeartbeatError(E.INVALID_REQUEST, f"MemberEpoch is {epoch}, but must be greater than or equal "
                                 "to -2.")
        owned = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
        if any(t is not None for t in owned) and any(t is None for t in owned):
            raise HeartbeatError(E.INVALID_REQUEST, "If one task-type is non-null, all must be non-null.")
        if epoch != 0 and request.topology is not None:
            raise HeartbeatError(E.INVALID_REQUEST, "Topology can only be provided when (re-)joining.")

    def heartbeat(self, request: Any, api_version: int, client_id: str, client_host: str,
                  may_create: Callable[[str], bool] = lambda _name: True) -> HeartbeatResult:
        """GroupMetadataManager.streamsGroupHeartbeat (and streamsGroupLeave for epochs -1 and -2). `may_create`
        says whether the caller may create an internal topic (KafkaApis checks CREATE before creating them)."""
        self.validate(request)
        try:
            new_topology = tp.StreamsTopology.from_request(request.topology) if request.topology else None
        except KafkaError as e:
            raise HeartbeatError(e.code, e.message) from None
        gid, epoch, mid = request.group_id, request.member_epoch, request.member_id
        if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(gid, mid, epoch)
        group = self.groups.get(gid)
        saved = None if group is None else group.to_json()  # a heartbeat that changes nothing writes nothing
        if group is None:
            if epoch != 0:
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Streams group {gid} not found.")
            other = self._other_group_type(gid) if self._other_group_type else None
            if other is not None:  # getOrCreateStreamsGroup: a group id holds one group type
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
            group = StreamsGroup(gid)
        elif epoch == 0 and mid not in group.members and len(group.members) >= self.config.max_size:
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, f"The streams group has reached its maximum capacity "
                                 f"of {self.config.max_size} members.")
        member = group.members.get(mid)
        owned_active = _tasks(request.active_tasks)
        if member is None:
            if epoch != 0:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            member = StreamsGroupMember(mid)
            is_new = True
        else:
            is_new = False
            if epoch != 0:
                self._check_epoch(member, epoch, owned_active)
        # 2. the topology: set by the first member, kept otherwise (Kafka does not update a group's topology)
        topology = group.topology
        topology_changed = False
        if new_topology is not None:
            if topology is None:
                topology, topology_changed = new_topology, True
                log.info("streams group %s: member %s initialized the topology with epoch %d", gid, mid,
                         new_topology.epoch)
            elif topology.epoch <= new_topology.epoch and topology.to_json() != new_topology.to_json():
                raise HeartbeatError(E.INVALID_REQUEST, "Topology updates are not supported yet.")
        # 1. the member's metadata; an assignment-relevant change bumps the group epoch
        updated = member.copy()
        if request.rack_id is not None:
            updated.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = request.rebalance_timeout_ms
        if new_topology is not None:
            updated.topology_epoch = new_topology.epoch
        updated.client_id, updated.client_host = client_id, client_host
        if request.process_id is not None:
            updated.process_id = request.process_id
        if request.client_tags is not None:
            updated.client_tags = {kv.key: kv.value for kv in request.client_tags}
        if request.user_endpoint is not None:
            updated.user_endpoint = (request.user_endpoint.host, int(request.user_endpoint.port))
        if request.task_offsets is not None:
            updated.task_offsets = {(t.subtopology_id, t.partition): t.offset for t in request.task_offsets}
        if request.task_end_offsets is not None:
            updated.task_end_offsets = {(t.subtopology_id, t.partition): t.offset for t in request.task_end_offsets}
        bump = is_new or topology_changed or _assignment_metadata(member) != _assignment_metadata(updated)
        # 3. the topology on the topics that exist now
        configured = tp.configure(topology, self._partitions_of) if topology is not None else None
        if configured is not None and configured.ready:
            self._check_owned_tasks(configured.tasks, request)
        # nothing is changed before here: every check above refuses the heartbeat with the group as it was
        if gid not in self.groups:
            self.groups[gid] = group
            self._offsets_holder(gid)
            delay = self._initial_delay(gid)
            if delay > 0:  # streamsInitialRebalanceKey: the first assignment waits for more members
                self.timer.schedule(("streams-initial-rebalance", gid), self._now() + delay,
                                    lambda: self._on_initial_rebalance(gid))
        group.topology = topology
        group.topology_ready = configured is not None and configured.ready
        group.members[mid] = updated
        signature = self._signature(group)
        if signature != group.metadata_signature:
            group.metadata_signature, bump = signature, True
        standby = self._num_standby(gid)
        if standby != group.last_num_standby:  # the assignment configs changed: reassign
            group.last_num_standby, bump = standby, True
        if bump:
            group.group_epoch += 1
        delayed = False
        if group.group_epoch > group.assignment_epoch:
            if self.timer.is_scheduled(("streams-initial-rebalance", gid)):
                delayed = True  # the member gets an empty assignment meanwhile
            else:
                self._compute_target(group)
        # 5. reconcile the member towards its target
        if delayed:
            reconciled = self._delayed(updated, max(1, group.assignment_epoch))
        else:
            owned = TasksTuple() if epoch == 0 else None if request.active_tasks is None else \
                TasksTuple(owned_active or {}, _tasks(request.standby_tasks) or {}, _tasks(request.warmup_tasks) or {})
            reconciled = reconcile(group, updated, owned)
        group.members[mid] = reconciled
        if request.shutdown_application:
            group.shutdown_requested_by = mid
        send = epoch == 0 or not tuple_equal(member.assigned, reconciled.assigned)
        if send and reconciled.user_endpoint is not None:
            group.endpoint_epoch += 1
        if group.to_json() != saved:
            self._save()
        if configured is not None and configured.to_create:
            self._create_internal_topics(gid, configured, may_create)  # after the answer, as Kafka does
        now = self._now()
        reconciled.session_deadline_ms = now + self._session_timeout(gid)
        if reconciled.state == MemberState.UNREVOKED_TASKS:
            if member.state != MemberState.UNREVOKED_TASKS or member.rebalance_deadline_ms < 0:
                reconciled.rebalance_deadline_ms = now + max(reconciled.rebalance_timeout_ms, 0)
            else:
                reconciled.rebalance_deadline_ms = member.rebalance_deadline_ms
        else:
            reconciled.rebalance_deadline_ms = -1
        self._schedule(gid, reconciled)
        status = self._status(group, reconciled, api_version, configured, delayed)
        endpoints = self._endpoints(group, reconciled) \
            if request.endpoint_information_epoch != group.endpoint_epoch else None
        return HeartbeatResult(reconciled, self._heartbeat_interval(gid), send, status, group.endpoint_epoch,
                               endpoints)

    @staticmethod
    def _delayed(member: StreamsGroupMember, epoch: int) -> StreamsGroupMember:
        """During the initial rebalance delay a joining member is at epoch max(1, assignment epoch) with nothing
        assigned (GroupMetadataManager: TasksTuple.EMPTY)."""
        m = member.copy()
        if m.member_epoch != epoch:
            m.previous_member_epoch, m.member_epoch = m.member_epoch, epoch
        m.assigned, m.pending_revocation, m.state = TasksTuple(), TasksTuple(), MemberState.STABLE
        return m

    def _initial_delay(self, group_id: str) -> int:
        return self._group_int(group_id, "streams.initial.rebalance.delay.ms", self.config.initial_rebalance_delay_ms)

    def _on_initial_rebalance(self, group_id: str) -> None:
        """The delay is over: compute the target assignment for everyone who joined meanwhile."""
        group = self.groups.get(group_id)
        if group is None or group.group_epoch <= group.assignment_epoch:
            return
        self._compute_target(group)
        self._save()

    @staticmethod
    def _check_owned_tasks(tasks: dict[str, int], request: Any) -> None:
        """throwIfRequestContainsInvalidTasks, once the topology can run."""
        for owned in (request.active_tasks, request.standby_tasks, request.warmup_tasks):
            for t in owned or []:
                if t.subtopology_id not in tasks:
                    raise HeartbeatError(E.INVALID_REQUEST, f"Subtopology {t.subtopology_id} does not exist in the "
                                         "topology.")
                for p in t.partitions or []:
                    if not 0 <= p < tasks[t.subtopology_id]:
                        raise HeartbeatError(E.INVALID_REQUEST, f"Task {p} for subtopology {t.subtopology_id} is "
                                             f"invalid. Number of tasks for this subtopology: "
                                             f"{tasks[t.subtopology_id]}")

    def _check_epoch(self, member: StreamsGroupMember, received: int, owned: Tasks | None) -> None:
        """throwIfStreamsGroupMemberEpochIsInvalid: a lost response is tolerated at the previous epoch."""
        if received > member.member_epoch:
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The streams group member has a greater member epoch "
                                 f"({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if received < member.member_epoch and (received != member.previous_member_epoch or owned is None
                                               or not ids(owned) <= ids(member.assigned.active)):
            raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The streams group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")

    def _refresh_topology(self, group: StreamsGroup) -> tp.ConfiguredTopology | None:
        """Configure the topology on the topics that exist now."""
        if group.topology is None:
            group.topology_ready = False
            return None
        configured = tp.configure(group.topology, self._partitions_of)
        group.topology_ready = configured.ready
        return configured

    def _create_internal_topics(self, group_id: str, configured: tp.ConfiguredTopology,
                                may_create: Callable[[str], bool]) -> None:
        """Create the missing internal topics (Kafka's coordinator returns them for the broker to create after the
        answer, so the member sees MISSING_INTERNAL_TOPICS once and the tasks at a later heartbeat): only those the
        member may create, and no more partitions in all than one CreateTopics request may ask for."""
        created: list[str] = []
        budget = MAX_INTERNAL_TOPIC_PARTITIONS
        if self.topics is not None:
            for name, info in sorted(configured.to_create.items()):
                if not may_create(name):
                    log.warning("streams group %s: not authorized to CREATE internal topic %s", group_id, name)
                    continue
                budget -= info.partitions
                if budget < 0:
                    log.warning("streams group %s: internal topic %s not created: the topology asks for more than "
                                "%d partitions", group_id, name, MAX_INTERNAL_TOPIC_PARTITIONS)
                    break
                try:
                    self.topics.create_topic(name, info.partitions, info.replication_factor or 1, info.configs)
                    created.append(name)
                except KafkaError as e:
                    if e.code != E.TOPIC_ALREADY_EXISTS:
                        log.warning("streams group %s: creating internal topic %s failed: %s", group_id,
                                    name, e.message)
        if created:
            log.info("streams group %s: created internal topics %s", group_id, ", ".join(created))

    def _partitions_of(self, name: str) -> int | None:
        info = self.topics.get(name) if self.topics is not None else None
        return None if info is None else int(info.partitions)

    def _signature(self, group: StreamsGroup) -> str:
        """What Kafka's metadata hash covers: the partition counts of the topology's topics."""
        if group.topology is None:
            return ""
        names = sorted({t for s in group.topology.subtopologies.values()
                        for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics),
                                  *(c.name for c in s.changelog_topics))})
        return ";".join(f"{n}:{self._partitions_of(n)}" for n in names)

    def _compute_target(self, group: StreamsGroup) -> None:
        """TargetAssignmentBuilder with the sticky task assignor; no tasks while the topology cannot run."""
        configured = tp.configure(group.topology, self._partitions_of) if group.topology else None
        counts = configured.tasks if configured is not None and configured.ready else {}
        members = [AssignmentMember(m.member_id, m.process_id or m.member_id,
                                    _union(m.assigned.active, m.pending_revocation.active), m.assigned.standby)
                   for m in group.members.values()]
        stateful = {sid for sid, s in group.topology.subtopologies.items() if s.changelog_topics} \
            if group.topology else set()
        group.target = assign(members, counts, self._num_standby(group.group_id), stateful)
        group.assignment_epoch = group.group_epoch

    def _status(self, group: StreamsGroup, member: StreamsGroupMember, api_version: int,
                configured: tp.ConfiguredTopology | None, delayed: bool) -> list[tuple[int, str]]:
        """The statuses in Kafka's order: stale topology, assignment delayed, the topology's configuration,
        shutdown, then (v1+) missing client tags."""
        out: list[tuple[int, str]] = []
        if group.topology is not None and member.topology_epoch < group.topology.epoch:
            out.append((tp.STALE_TOPOLOGY, f"The member's topology epoch {member.topology_epoch} is behind the "
                        f"group's topology epoch {group.topology.epoch}."))
        if delayed:
            out.append((tp.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."))
        if configured is not None and configured.status is not None:
            out.append(configured.status)
        if group.shutdown_requested_by is not None:
            out.append((tp.SHUTDOWN_APPLICATION, f"Streams group member {group.shutdown_requested_by} encountered a "
                        "fatal error and requested a shutdown for the entire application."))
        tags = self.config.rack_aware_assignment_tags
        if api_version >= 1 and tags:  # MISSING_CLIENT_TAGS: only v1+ clients know the code (KAFKA-20744)
            missing = [t for t in tags if t not in member.client_tags]
            if missing:
                out.append((tp.MISSING_CLIENT_TAGS, f"The member does not provide the client tags "
                            f"{', '.join(missing)} that rack-aware assignment uses."))
        return out

    def _endpoints(self, group: StreamsGroup, member: StreamsGroupMember
                   ) -> list[tuple[tuple[str, int], dict[str, set[int]], dict[str, set[int]]]]:
        """maybeBuildEndpointToPartitions: every other member's endpoint, then this member's, each with the
        source partitions of its active and standby tasks (EndpointToPartitionsManager)."""
        out = []
        subs = group.topology.subtopologies if group.topology else {}

        def parts(tasks: Tasks) -> dict[str, set[int]]:
            topics: dict[str, set[int]] = {}
            for sid, ps in tasks.items():
                s = subs.get(sid)
                if s is None:
                    continue
                for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics)):
                    n = self._partitions_of(t) or 0
                    topics.setdefault(t, set()).update(p for p in ps if p < n)
            return topics
        others = [m for mid, m in sorted(group.members.items()) if mid != member.member_id]
        for m in [*others, member]:
            if m.user_endpoint is not None:
                out.append((m.user_endpoint, parts(m.assigned.active), parts(m.assigned.standby)))
        return out

    # ------------------------------------------------------------------------------------------- leave
    def _leave(self, gid: str, mid: str, epoch: int) -> HeartbeatResult:
        group = self.groups.get(gid)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Streams group {gid} not found.")
        member = group.members.get(mid)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        self.fence_member(group, member, "left the group")
        gone = member.copy()
        gone.member_epoch = epoch
        return HeartbeatResult(gone, 0, False, [], group.endpoint_epoch)

    def fence_member(self, group: StreamsGroup, member: StreamsGroupMember, reason: str) -> None:
        """streamsGroupFenceMember: remove the member, bump the group epoch (its tasks go to the others)."""
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        self.timer.cancel(("streams-session", group.group_id, member.member_id))
        self.timer.cancel(("streams-rebalance", group.group_id, member.member_id))
        group.group_epoch += 1
        group.endpoint_epoch += 1
        if not group.members:
            group.shutdown_requested_by = None
        self._save()
        log.info("streams group %s: member %s %s", group.group_id, member.member_id, reason)

    # ------------------------------------------------------------------------------------------ timers
    def check_expirations(self) -> None:
        self.timer.run_due()

    def _schedule(self, gid: str, member: StreamsGroupMember) -> None:
        mid = member.member_id
        for kind, due in (("streams-session", member.session_deadline_ms),
                          ("streams-rebalance", member.rebalance_deadline_ms)):
            key = (kind, gid, mid)
            if due < 0:
                self.timer.cancel(key)
            else:
                self.timer.schedule(key, due, lambda: self._on_deadline(gid, mid))

    def _on_deadline(self, gid: str, mid: str) -> None:
        group = self.groups.get(gid)
        member = None if group is None else group.members.get(mid)
        if group is None or member is None:
            return
        now = self._now()
        try:
            if 0 <= member.session_deadline_ms <= now:
                self.fence_member(group, member, "session timed out")
            elif 0 <= member.rebalance_deadline_ms <= now:
                self.fence_member(group, member, "did not revoke its tasks within the rebalance timeout")
            else:
                self._schedule(gid, member)
        except OSError:
            log.exception("streams group %s: fencing member %s failed; retrying", gid, mid)
            self.timer.schedule(("streams-session", gid, mid), now + _FENCE_RETRY_MS,
                                lambda: self._on_deadline(gid, mid))

    def _save(self) -> None:
        self.store.save(self.groups)

    async def durable(self) -> None:
        """Until every change made so far is on disk, awaited before a heartbeat or DeleteGroups answer (KafkaError
        UNKNOWN_SERVER_ERROR if the write failed: unlike Kafka the change stays in memory, and the writer retries
        it)."""
        # as Kafka's CoordinatorRuntime: a write answers once committed, a read once the last pending write is
        try:
            await self.store.durable()
        except Exception as exc:  # an OSError, or a bug (a hook, the snapshot): the writer logged it
            raise KafkaError(E.UNKNOWN_SERVER_ERROR,
                             f"Cannot write the streams-group state: {_describe(exc)}") from exc

    # ------------------------------------------------------------------------------------------- admin
    def describe(self, group_id: str) -> StreamsGroup | None:
        return self.groups.get(group_id)

    def list_groups(self) -> list[StreamsGroup]:
        return list(self.groups.values())

    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if not group.is_empty():
            return E.NON_EMPTY_GROUP
        del self.groups[group_id]
        self.timer.cancel(("streams-initial-rebalance", group_id))
        self._save()
        holder = self.classic.manager.get_group(group_id)
        return int(self.classic.manager.delete_group(holder)) if holder is not None else E.NONE

    def _offsets_holder(self, group_id: str) -> GroupMetadata:
        holder: GroupMetadata | None = self.classic.manager.get_group(group_id)
        if holder is None:
            holder = self.classic.manager.add_group(GroupMetadata(group_id,
                                                                  state_timestamp_ms=self.clock.milliseconds()))
        return holder

    # ----------------------------------------------------------------------------------- OffsetCommit
    def commit_offsets(self, group_id: str, member_id: str, member_epoch: int, api_version: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """StreamsGroup.validateOffsetCommit, then the classic store."""
        group = self.groups[group_id]
        error = E.NONE
        if not (member_epoch < 0 and group.is_empty()):
            member = group.members.get(member_id)
            if member is None:
                error = E.UNKNOWN_MEMBER_ID
            elif api_version < 9:
                error = E.UNSUPPORTED_VERSION
            elif member_epoch != member.member_epoch:
                error = E.STALE_MEMBER_EPOCH
        if error != E.NONE:
            return dict.fromkeys(offsets, int(error))
        self._offsets_holder(group_id)
        result: dict[TopicPartition, int] = self.classic.commit_offsets(group_id, "", None, -1, offsets)
        return result

    def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           instance_id: str | None, member_epoch: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
        """TxnOffsetCommit (Kafka Streams' exactly-once) to a streams group: StreamsGroup.validateOffsetCommit
        with isTransactional: no member fields, or an empty group, need no member; else the member must exist
        (UNKNOWN_MEMBER_ID) at that epoch (ILLEGAL_GENERATION). Staged in the offsets holder until the marker."""
        error = txn_offset_commit_error(self.groups[group_id], member_id, instance_id, member_epoch)
        if error != E.NONE:
            return dict.fromkeys(offsets, int(error))
        self._offsets_holder(group_id)
        result: dict[TopicPartition, int] = self.classic.txn_commit_offsets(
            group_id, producer_id, producer_epoch, "", None, -1, offsets)
        return result

    def subscribed_topics(self, group_id: str) -> set[str]:
        """StreamsGroup.isSubscribedToTopic: the source and repartition source topics of a running topology (of
        a group with members: an empty application's offsets may be deleted)."""
        group = self.groups.get(group_id)
        if group is None or group.topology is None or group.is_empty():
            return set()
        if not tp.configure(group.topology, self._partitions_of).ready:
            return set()
        return {t for s in group.topology.subtopologies.values()
                for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))}

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """StreamsGroup.validateOffsetFetch (OffsetFetch v9+)."""
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and member_id is None):
            return E.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def shutdown(self) -> None:
        """Broker shutdown: what the last changes left unwritten goes to disk now."""
        self.store.flush()


def _describe(exc: Exception) -> str:
    """A failed write as an answer's message: an OSError's text, or a bug's exception type too."""
    return str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def _tasks(task_ids: Any) -> Tasks | None:
    if task_ids is None:
        return None
    out: Tasks = {}
    for t in task_ids:
        out.setdefault(t.subtopology_id, set()).update(t.partitions or [])
    return out


def _assignment_metadata(m: StreamsGroupMember) -> tuple[Any, ...]:
    """The member metadata whose change Kafka persists and answers with a new group epoch
    (hasStreamsMemberMetadataChanged)."""
    return (m.rack_id, m.process_id, sorted(m.client_tags.items()), m.user_endpoint, m.topology_epoch,
            m.rebalance_timeout_ms, m.instance_id)


def _union(a: Tasks, b: Tasks) -> Tasks:
    out: Tasks = {k: set(v) for k, v in a.items()}
    for k, v in b.items():
        out.setdefault(k, set()).update(v)
    return out
