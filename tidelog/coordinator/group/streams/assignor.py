"""Kafka's sticky task assignor for streams groups (group-coordinator's streams.assignor.StickyTaskAssignor), in
its rules:

1. Every task is an active task of exactly one member. A member keeps the active tasks it owns (current
   assignment, or the previous target) while it is under its fair share (ceil(tasks / members)); the rest go,
   one at a time in task order, to a member that had the task as a standby, else to the least-loaded member
   (fewest tasks on its process, then fewest on the member, then member id).
2. Each task gets `num_standby_replicas` standby tasks, each on a process that has neither the active task nor
   another standby of it; a previous standby owner keeps it first; else the least-loaded eligible member.
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


def assign(members: list[AssignmentMember], task_counts: dict[str, int], num_standby: int) -> dict[str, TasksTuple]:
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

    def least_loaded(candidates: list[str], load: dict[str, set[TaskId]]) -> str:
        return min(candidates, key=lambda mid: (process_load[process_of[mid]], len(load[mid]), mid))

    for task in all_tasks:
        if task in owner:
            continue
        under = [mid for mid in active if len(active[mid]) < fair] or list(active)
        former = [mid for mid in previous_standby[task] if mid in under]
        chosen = least_loaded(former, active) if former else least_loaded(under, active)
        owner[task] = chosen
        give(chosen, task, active)
    standby: dict[str, set[TaskId]] = {m.member_id: set() for m in members}
    if num_standby > 0:  # 2. standby replicas on other processes
        for task in all_tasks:
            used = {process_of[owner[task]]}
            for _ in range(num_standby):
                eligible = [mid for mid in standby if process_of[mid] not in used]
                if not eligible:
                    break
                former = [mid for mid in previous_standby[task] if mid in eligible]
                chosen = former[0] if former else \
                    min(eligible, key=lambda mid: (process_load[process_of[mid]],
                                                   len(active[mid]) + len(standby[mid]), mid))
                give(chosen, task, standby)
                used.add(process_of[chosen])
    return {m.member_id: TasksTuple(_tasks(active[m.member_id]), _tasks(standby[m.member_id]), {})
            for m in members}
