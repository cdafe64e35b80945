"""A streams group and its members (Kafka's StreamsGroup and StreamsGroupMember) and the member reconciliation
(Kafka's streams CurrentAssignmentBuilder): a member moves to the target assignment's epoch only once it no
longer owns an active task the target gives to another member, and gets an active task only once no other
member owns it or still has to revoke it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from tidelog.coordinator.group.streams.assignor import TaskId, Tasks, TasksTuple
from tidelog.coordinator.group.streams.topology import StreamsTopology

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(Enum):
    STABLE = "stable"
    UNREVOKED_TASKS = "unrevoked_tasks"
    UNRELEASED_TASKS = "unreleased_tasks"


class StreamsGroupState(Enum):  # Kafka's StreamsGroup.StreamsGroupState
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


def ids(tasks: Tasks) -> set[TaskId]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def tasks_of(task_ids: set[TaskId]) -> Tasks:
    out: Tasks = {}
    for s, p in task_ids:
        out.setdefault(s, set()).add(p)
    return out


def tasks_json(tasks: Tasks) -> dict[str, list[int]]:
    return {s: sorted(ps) for s, ps in sorted(tasks.items()) if ps}


def tasks_from_json(d: dict[str, Any]) -> Tasks:
    return {str(s): {int(p) for p in ps} for s, ps in d.items()}


def tuple_json(t: TasksTuple) -> dict[str, Any]:
    return {"active": tasks_json(t.active), "standby": tasks_json(t.standby), "warmup": tasks_json(t.warmup)}


def tuple_from_json(d: dict[str, Any]) -> TasksTuple:
    return TasksTuple(tasks_from_json(d["active"]), tasks_from_json(d["standby"]), tasks_from_json(d["warmup"]))


def tuple_equal(a: TasksTuple, b: TasksTuple) -> bool:
    return (ids(a.active), ids(a.standby), ids(a.warmup)) == (ids(b.active), ids(b.standby), ids(b.warmup))


@dataclass
class StreamsGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = 0
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    task_offsets: dict[TaskId, int] = field(default_factory=dict)
    task_end_offsets: dict[TaskId, int] = field(default_factory=dict)
    assigned: TasksTuple = field(default_factory=TasksTuple)
    pending_revocation: TasksTuple = field(default_factory=TasksTuple)
    # not persisted: the deadlines on the coordinator's clock
    session_deadline_ms: int = -1
    rebalance_deadline_ms: int = -1

    def copy(self) -> StreamsGroupMember:
        return copy.deepcopy(self)

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.member_epoch, "previous_epoch": self.previous_member_epoch, "state": self.state.value,
                "instance_id": self.instance_id, "rack_id": self.rack_id, "client_id": self.client_id,
                "client_host": self.client_host, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "topology_epoch": self.topology_epoch, "process_id": self.process_id,
                "user_endpoint": list(self.user_endpoint) if self.user_endpoint else None,
                "client_tags": self.client_tags,
                "task_offsets": [[s, p, o] for (s, p), o in sorted(self.task_offsets.items())],
                "task_end_offsets": [[s, p, o] for (s, p), o in sorted(self.task_end_offsets.items())],
                "assigned": tuple_json(self.assigned), "pending_revocation": tuple_json(self.pending_revocation)}

    @classmethod
    def from_json(cls, member_id: str, d: dict[str, Any]) -> StreamsGroupMember:
        endpoint = d["user_endpoint"]
        return cls(member_id, int(d["epoch"]), int(d["previous_epoch"]), MemberState(d["state"]), d["instance_id"],
                   d["rack_id"], str(d["client_id"]), str(d["client_host"]), int(d["rebalance_timeout_ms"]),
                   int(d["topology_epoch"]), str(d["process_id"]),
                   (str(endpoint[0]), int(endpoint[1])) if endpoint else None,
                   {str(k): str(v) for k, v in d["client_tags"].items()},
                   {(str(s), int(p)): int(o) for s, p, o in d["task_offsets"]},
                   {(str(s), int(p)): int(o) for s, p, o in d["task_end_offsets"]},
                   tuple_from_json(d["assigned"]), tuple_from_json(d["pending_revocation"]))


@dataclass
class StreamsGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: StreamsTopology | None = None
    metadata_signature: str = ""  # the partition counts the last target assignment saw
    endpoint_epoch: int = 0
    last_num_standby: int = 0  # the assignment config the last target assignment used
    members: dict[str, StreamsGroupMember] = field(default_factory=dict)
    target: dict[str, TasksTuple] = field(default_factory=dict)
    shutdown_requested_by: str | None = None  # not persisted (Kafka keeps it in memory too)
    topology_ready: bool = False  # the last configuration of the topology could run (not persisted)

    def is_empty(self) -> bool:
        return not self.members

    @property
    def state(self) -> StreamsGroupState:
        """StreamsGroup.maybeUpdateGroupState."""
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or not self.topology_ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def static_member(self, instance_id: str) -> StreamsGroupMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owned_elsewhere(self, member_id: str) -> set[TaskId]:
        """Active tasks another member owns or still has to revoke (not released to `member_id` yet)."""
        out: set[TaskId] = set()
        for m in self.members.values():
            if m.member_id != member_id:
                out |= ids(m.assigned.active) | ids(m.pending_revocation.active)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"group_epoch": self.group_epoch, "assignment_epoch": self.assignment_epoch,
                "topology": self.topology.to_json() if self.topology else None,
                "metadata_signature": self.metadata_signature, "endpoint_epoch": self.endpoint_epoch,
                "num_standby": self.last_num_standby,
                "members": {mid: m.to_json() for mid, m in self.members.items()},
                "target": {mid: tuple_json(t) for mid, t in self.target.items()}}

    @classmethod
    def from_json(cls, group_id: str, d: dict[str, Any]) -> StreamsGroup:
        return cls(group_id, int(d["group_epoch"]), int(d["assignment_epoch"]),
                   StreamsTopology.from_json(d["topology"]) if d["topology"] else None,
                   str(d["metadata_signature"]), int(d["endpoint_epoch"]), int(d["num_standby"]),
                   {mid: StreamsGroupMember.from_json(mid, m) for mid, m in d["members"].items()},
                   {mid: tuple_from_json(t) for mid, t in d["target"].items()})


def _minus(a: TasksTuple, b: TasksTuple) -> TasksTuple:
    return TasksTuple(tasks_of(ids(a.active) - ids(b.active)), tasks_of(ids(a.standby) - ids(b.standby)),
                      tasks_of(ids(a.warmup) - ids(b.warmup)))


def _all(t: TasksTuple) -> set[tuple[str, TaskId]]:
    return {("a", x) for x in ids(t.active)} | {("s", x) for x in ids(t.standby)} | {("w", x) for x in ids(t.warmup)}


def _is_empty(t: TasksTuple) -> bool:
    return not (ids(t.active) or ids(t.standby) or ids(t.warmup))


def reconcile(group: StreamsGroup, member: StreamsGroupMember, owned: TasksTuple | None) -> StreamsGroupMember:
    """The streams CurrentAssignmentBuilder: `owned` is what the member reported (None: not reported)."""
    target_epoch = group.assignment_epoch
    target = group.target.get(member.member_id, TasksTuple())
    m = member.copy()
    if m.state == MemberState.UNREVOKED_TASKS:
        if owned is None or _all(owned) & _all(m.pending_revocation):
            return m  # still owns what it must give up
    elif m.state == MemberState.STABLE and m.member_epoch == target_epoch:
        return m
    revoke = _minus(m.assigned, target)
    kept = TasksTuple(tasks_of(ids(m.assigned.active) & ids(target.active)),
                      tasks_of(ids(m.assigned.standby) & ids(target.standby)),
                      tasks_of(ids(m.assigned.warmup) & ids(target.warmup)))
    if not _is_empty(revoke) and (owned is None or _all(owned) & _all(revoke)):
        m.assigned, m.pending_revocation, m.state = kept, revoke, MemberState.UNREVOKED_TASKS
        return m
    # tasks not released yet (isUnreleasedTask), on the group's current assignments (this member's included, as
    # they were before this heartbeat): an active task some member still owns, or any task whose standby /
    # warm-up copy, or active copy for a standby, is still on this member's process
    active_owner: dict[TaskId, str] = {}
    copies: dict[TaskId, set[str]] = {}
    for other in group.members.values():
        for t in ids(other.assigned.active) | ids(other.pending_revocation.active):
            active_owner[t] = other.process_id
        for t in ids(other.assigned.standby) | ids(other.pending_revocation.standby) | \
                ids(other.assigned.warmup) | ids(other.pending_revocation.warmup):
            copies.setdefault(t, set()).add(other.process_id)
    here = m.process_id

    def unreleased_active(t: TaskId) -> bool:
        return t in active_owner or here in copies.get(t, set())

    def unreleased_copy(t: TaskId) -> bool:
        return active_owner.get(t) == here or here in copies.get(t, set())

    withheld = False
    parts: list[set[TaskId]] = []
    for have, want, unreleased in ((ids(kept.active), ids(target.active), unreleased_active),
                                   (ids(kept.standby), ids(target.standby), unreleased_copy),
                                   (ids(kept.warmup), ids(target.warmup), unreleased_copy)):
        pending = {t for t in want - have if not unreleased(t)}
        withheld = withheld or bool(want - have - pending)
        parts.append(have | pending)
    m.assigned = TasksTuple(tasks_of(parts[0]), tasks_of(parts[1]), tasks_of(parts[2]))
    m.pending_revocation = TasksTuple()
    if m.member_epoch != target_epoch:
        m.previous_member_epoch, m.member_epoch = m.member_epoch, target_epoch
    m.state = MemberState.UNRELEASED_TASKS if withheld else MemberState.STABLE
    return m
