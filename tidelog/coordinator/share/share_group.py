"""Share groups' membership (KIP-932; Kafka's ShareGroup, ShareGroupMember and the `simple` assignor).

A member names itself (the client generates its member id), subscribes to topic names and heartbeats. There is
no revocation step: when the target assignment changes, each member moves straight to it on its next heartbeat
and takes the assignment epoch as its member epoch (ShareGroupAssignmentBuilder). Several members may share a
partition: records, not partitions, are what a share group hands out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# topic id -> partitions
Assignment = dict[bytes, set[int]]

EMPTY, STABLE = "Empty", "Stable"  # ShareGroupState (Dead / Unknown are never listed)
ASSIGNOR_NAME = "simple"


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    subscribed: tuple[str, ...] = ()
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assigned: Assignment = field(default_factory=dict)
    session_deadline_ms: int = 0


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> its target assignment
    metadata: tuple[tuple[str, bytes, int], ...] = ()  # (name, id, partitions) of the subscribed topics last seen

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY

    def subscribed_topics(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed}


def simple_assign(members: Mapping[str, Iterable[str]], topics: Mapping[str, tuple[bytes, int]],
                  previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's SimpleAssignor: balance first, then stickiness. With one subscription for all (homogeneous) the
    partitions of every subscribed topic are spread together; otherwise each topic over its own subscribers.
    With M members and P partitions each partition goes to ceil(M/P) members, and the ceil(M/P)*P slots are
    spread evenly over the members (member i of M takes ceil(x*(i+1)) - ceil(x*i) of them, x = slots / M).
    `topics`: name -> (topic id, partition count) for the subscribed topics that exist."""
    subscriptions = {m: frozenset(t for t in subs if t in topics) for m, subs in members.items()}
    result: dict[str, Assignment] = {m: {} for m in members}
    if not subscriptions:
        return result
    groups: list[tuple[list[str], list[tuple[bytes, int]]]] = []
    if len(set(subscriptions.values())) == 1:  # homogeneous
        names = sorted(next(iter(subscriptions.values())))
        groups.append((sorted(subscriptions), [(topics[n][0], p) for n in names for p in range(topics[n][1])]))
    else:
        for name in sorted({t for subs in subscriptions.values() for t in subs}):
            subscribers = sorted(m for m, subs in subscriptions.items() if name in subs)
            groups.append((subscribers, [(topics[name][0], p) for p in range(topics[name][1])]))
    for group_members, partitions in groups:
        for member, tps in _assign_one(group_members, partitions, previous).items():
            for topic_id, partition in tps:
                result[member].setdefault(topic_id, set()).add(partition)
    return result


def _assign_one(members: list[str], partitions: list[tuple[bytes, int]],
                previous: Mapping[str, Assignment]) -> dict[str, set[tuple[bytes, int]]]:
    out: dict[str, set[tuple[bytes, int]]] = {m: set() for m in members}
    if not members or not partitions:
        return out
    sharing = math.ceil(len(members) / len(partitions))
    slots = sharing * len(partitions)
    x = slots / len(members)
    quota = {m: math.ceil(round(x * (i + 1), 9)) - math.ceil(round(x * i, 9)) for i, m in enumerate(members)}
    holders: dict[tuple[bytes, int], list[str]] = {tp: [] for tp in partitions}
    # stickiness: keep what members held, within their quota and the partition's sharing
    for m in members:
        for topic_id, parts in sorted(previous.get(m, {}).items()):
            for p in sorted(parts):
                tp = (topic_id, p)
                if tp in holders and len(out[m]) < quota[m] and len(holders[tp]) < sharing:
                    out[m].add(tp)
                    holders[tp].append(m)
    # fill: partitions needing members go round robin to members below quota that do not hold them yet
    turn = 0
    for tp in partitions:
        while len(holders[tp]) < sharing:
            candidates = [m for m in members if len(out[m]) < quota[m] and tp not in out[m]]
            if not candidates:
                break  # a slight imbalance Kafka accepts too
            m = candidates[turn % len(candidates)]
            turn += 1
            out[m].add(tp)
            holders[tp].append(m)
    return out
