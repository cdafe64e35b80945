"""Server-side partition assignors of KIP-848 consumer groups (`group.consumer.assignors`).

Both take the group's members (their subscriptions and current target assignment) and the subscribed topics'
metadata and return each member's new target assignment, keyed by topic id.

* `UniformAssignor` (Kafka's UniformAssignor, the default): every partition of a subscribed topic goes to
  one subscriber; members end up with counts differing by at most one among those sharing subscriptions,
  and partitions stay with their current owner whenever balance allows (stickiness keeps revocations few).
* `RangeAssignor` (Kafka's server-side RangeAssignor): per topic, the subscribers sorted by member id get
  contiguous ranges, the first `partitions % members` one partition more (co-partitioned topics line up).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

Assignment = dict[uuid.UUID, set[int]]  # topic id -> partitions


@dataclass(slots=True)
class MemberSubscription:
    member_id: str
    topics: set[uuid.UUID]  # subscribed topic ids (existing topics only)
    current: Assignment = field(default_factory=dict)  # the member's current target assignment


class PartitionAssignor(Protocol):
    name: str

    def assign(self, members: list[MemberSubscription], partitions: dict[uuid.UUID, int]) -> dict[str, Assignment]:
        ...


def _empty(members: list[MemberSubscription]) -> dict[str, Assignment]:
    return {m.member_id: {} for m in members}


class RangeAssignor:
    name = "range"

    def assign(self, members: list[MemberSubscription], partitions: dict[uuid.UUID, int]) -> dict[str, Assignment]:
        result = _empty(members)
        for topic_id, count in sorted(partitions.items(), key=lambda kv: str(kv[0])):
            subscribers = sorted(m.member_id for m in members if topic_id in m.topics)
            if not subscribers:
                continue
            quota, extra = divmod(count, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                n = quota + (1 if i < extra else 0)
                if n:
                    result[member_id][topic_id] = set(range(start, start + n))
                start += n
        return result


class UniformAssignor:
    name = "uniform"

    def assign(self, members: list[MemberSubscription], partitions: dict[uuid.UUID, int]) -> dict[str, Assignment]:
        result = _empty(members)
        if not members:
            return result
        by_id = {m.member_id: m for m in members}
        load = dict.fromkeys(by_id, 0)
        owner: dict[tuple[uuid.UUID, int], str] = {}
        all_parts = [(t, p) for t, n in sorted(partitions.items(), key=lambda kv: str(kv[0])) for p in range(n)]
        # The balanced share of a member: partitions it can take over the members that can take them.
        eligible = {m.member_id: sum(partitions[t] for t in m.topics if t in partitions) for m in members}
        total = len(all_parts)
        # Keep current owners first (stickiness), up to a ceiling of the uniform share.
        ceiling = -(-total // len(members)) if total else 0
        for m in sorted(members, key=lambda m: m.member_id):
            for topic_id, parts in sorted(m.current.items(), key=lambda kv: str(kv[0])):
                if topic_id not in m.topics or topic_id not in partitions:
                    continue
                for p in sorted(parts):
                    tp = (topic_id, p)
                    if p < partitions[topic_id] and tp not in owner and load[m.member_id] < ceiling:
                        owner[tp] = m.member_id
                        load[m.member_id] += 1
        # Hand out the rest to the least loaded subscriber (ties: fewest alternatives, then member id).
        for tp in all_parts:
            if tp in owner:
                continue
            candidates = [mid for mid, m in by_id.items() if tp[0] in m.topics]
            if not candidates:
                continue
            chosen = min(candidates, key=lambda mid: (load[mid], eligible[mid], mid))
            owner[tp] = chosen
            load[chosen] += 1
        # Even out: move partitions from the most to the least loaded member that may take them.
        moved = True
        while moved:
            moved = False
            for tp in sorted(owner, key=lambda tp: (str(tp[0]), tp[1])):
                current = owner[tp]
                candidates = [mid for mid, m in by_id.items() if tp[0] in m.topics and mid != current]
                if not candidates:
                    continue
                target = min(candidates, key=lambda mid: (load[mid], mid))
                if load[current] - load[target] > 1:
                    owner[tp] = target
                    load[current] -= 1
                    load[target] += 1
                    moved = True
        for (topic_id, p), member_id in owner.items():
            result[member_id].setdefault(topic_id, set()).add(p)
        return result


ASSIGNORS: dict[str, type[UniformAssignor] | type[RangeAssignor]] = {
    "uniform": UniformAssignor,
    "range": RangeAssignor,
    # Kafka accepts the class names too
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UniformAssignor,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RangeAssignor,
}


def build_assignors(names: list[str]) -> dict[str, PartitionAssignor]:
    """Assignors by their short name, in configured order (the first is the group default)."""
    out: dict[str, PartitionAssignor] = {}
    for name in names:
        cls = ASSIGNORS.get(name.strip())
        if cls is None:
            raise ValueError(f"unknown consumer group assignor {name!r}")
        out[cls.name] = cls()
    return out
