"""Kafka's sticky task assignor for streams groups (group-coordinator's streams.assignor.StickyTaskAssignor), in
its rules:

1. Every task is an active task of exactly one member. A member keeps the active tasks it owns while it is
   under its quota (ceil(tasks / members)); then a member that had the task as a standby gets it, under the same
   quota; the rest go, in task order, to the least-loaded process (tasks per member of the process), and there
   to its member with the fewest tasks.
2. Each task of a stateful subtopology (one with changelog topics) gets `num_standby_replicas` standby tasks,
   each on a process that has neither the active task nor another replica of it: the task's previous active
   owner first, then a previous standby owner, else the least-loaded eligible process's least-loaded member.
   Fewer eligible processes than replicas: fewer standbys, as Kafka.
3. Warm-up tasks are not assigned by this assignor (Kafka's StickyTaskAssignor returns none either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TaskId = tuple[str, int]  # (subtopology id, partition)
Tasks = dict[str, set[int]]


@dataclass
class AssignmentMember:
    member_id: str
    process_id: str
    active: Tasks = field(default_factory=dict)  # what it owns now (sticky)
    standby: Tasks = field(default_factory=dict)


@dataclass
class TasksTuple:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)


def _ids(tasks: Tasks) -> set[TaskId]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def _tasks(ids: set[TaskId]) -> Tasks:
    out: Tasks = {}
    for s, p in ids:
        out.setdefault(s, set()).add(p)
    return out


def assign(members: list[AssignmentMember], task_counts: dict[str, int], num_standby: int,
           stateful: set[str] | None = None) -> dict[str, TasksTuple]:
    members = sorted(members, key=lambda m: m.member_id)
    if not members:
        return {}
    all_tasks = sorted((s, p) for s, n in task_counts.items() for p in range(n))
    active: dict[str, set[TaskId]] = {m.member_id: set() for m in members}
    process_of = {m.member_id: m.process_id for m in members}
    process_load: dict[str, int] = dict.fromkeys(process_of.values(), 0)
    fair = math.ceil(len(all_tasks) / len(members)) if all_tasks else 0
    owner: dict[TaskId, str] = {}

    def give(member_id: str, task: TaskId, into: dict[str, set[TaskId]]) -> None:
        into[member_id].add(task)
        process_load[process_of[member_id]] += 1

    valid = set(all_tasks)
    for m in members:  # 1. sticky active tasks, up to the fair share
        for task in sorted(_ids(m.active) & valid):
            if task not in owner and len(active[m.member_id]) < fair:
                owner[task] = m.member_id
                give(m.member_id, task, active)
    previous_standby = {task: [m.member_id for m in members if task in _ids(m.standby)] for task in all_tasks}

    members_of: dict[str, int] = {}
    for m in members:
        members_of[m.process_id] = members_of.get(m.process_id, 0) + 1

    def load(mid: str) -> float:  # ProcessState.load: the process's tasks per member
        return process_load[process_of[mid]] / members_of[process_of[mid]]

    def least_loaded(candidates: list[str], tasks_of: dict[str, set[TaskId]]) -> str:
        return min(candidates, key=lambda mid: (load(mid), len(tasks_of[mid]), mid))

    for task in all_tasks:
        if task in owner:
            continue
        under = [mid for mid in active if len(active[mid]) < fair] or list(active)
        former = [mid for mid in previous_standby[task] if mid in under]
        chosen = least_loaded(former, active) if former else least_loaded(under, active)
        owner[task] = chosen
        give(chosen, task, active)
    standby: dict[str, set[TaskId]] = {m.member_id: set() for m in members}
    previous_active = {task: m.member_id for m in members for task in _ids(m.active)}
    if num_standby > 0:  # 2. standby replicas of stateful tasks on other processes
        both = {mid: active[mid] | standby[mid] for mid in active}
        for task in all_tasks:
            if stateful is not None and task[0] not in stateful:
                continue
            used = {process_of[owner[task]]}
            for _ in range(num_standby):
                eligible = [mid for mid in standby if process_of[mid] not in used]
                if not eligible:
                    break
                before = previous_active.get(task)
                former = [mid for mid in previous_standby[task] if mid in eligible]
                if before in eligible:
                    chosen = before
                elif former:
                    chosen = least_loaded(former, both)
                else:
                    chosen = least_loaded(eligible, both)
                give(chosen, task, standby)
                both[chosen].add(task)
                used.add(process_of[chosen])
    return {m.member_id: TasksTuple(_tasks(active[m.member_id]), _tasks(standby[m.member_id]), {})
            for m in members}
