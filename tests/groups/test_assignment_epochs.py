"""KIP-1251 assignment epochs (Kafka 4.3) over a real socket: each partition a KIP-848 member holds carries the
member epoch at which it was assigned, and OffsetCommit accepts a commit at an older member epoch for partitions
the member holds since that epoch or before (a member whose epoch moved on while its commit was in flight is not
fenced); a partition assigned later, or not held, is refused with STALE_MEMBER_EPOCH. The epochs are written
in ConsumerGroupCurrentMemberAssignmentValue's tagged AssignmentEpochs field, survive a restart, and a record
written without the field loads with every partition at max(MemberEpoch, 0)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.groups.test_consumer_group_wire import create_topic, heartbeat, join, parts, subscription
from tidelog.coordinator.group.consumer import records as cr
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

E = ErrorCode


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="wire-1251") as w:
        yield w


def commit(wire: KafkaWire, group: str, member_id: str, epoch: int, offsets: dict[tuple[str, int], int]) -> dict[
        tuple[str, int], int]:
    """OffsetCommit v9: the error code of each partition."""
    oc = request_class(8)[9]
    T = oc.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), offset in offsets.items():
        by_topic.setdefault(topic, []).append(P(partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                                                committed_metadata=""))
    req = oc(group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id, group_instance_id=None,
             topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
    return {(t.name, p.partition_index): int(p.error_code) for t in wire.request(8, 9, req).topics
            for p in t.partitions}


def committed(wire: KafkaWire, group: str) -> dict[tuple[str, int], int]:
    of = request_class(9)[8]
    fetched = wire.request(9, 8, of(groups=[of.OffsetFetchRequestGroup(group_id=group, topics=None)],
                                    require_stable=False))
    return {(t.name, p.partition_index): p.committed_offset for t in fetched.groups[0].topics for p in t.partitions}


def epochs_view(broker: BrokerHandle, group: str, member_id: str) -> tuple[int, dict[Any, Any], dict[Any, Any]]:
    """(member epoch, assigned, pending revocation) with each partition's assignment epoch, as the broker holds them."""
    def view() -> tuple[int, dict[Any, Any], dict[Any, Any]]:
        m = broker.state.groups.consumer_groups.groups[group].members[member_id]
        return m.member_epoch, {t: dict(ps) for t, ps in m.assigned.items()}, \
            {t: dict(ps) for t, ps in m.pending_revocation.items()}
    return broker.call(view)


def grow_member(wire: KafkaWire, group: str, kept: str, other: str, added: str) -> tuple[Any, dict[str, uuid.UUID]]:
    """Member `a` holds `kept` from epoch 1; member `b` (on `other`) bumps it to epoch 2; `a` then subscribes to
    `added` too and moves to epoch 3 with `added`'s partitions: `kept` at assignment epoch 1, `added` at 3."""
    ids = {t: create_topic(wire, t, 2) for t in (kept, other, added)}
    a = join(wire, group, [kept])
    assert a.member_epoch == 1 and parts(a) == {ids[kept]: [0, 1]}
    b = join(wire, group, [other])
    assert b.member_epoch == 2 and parts(b) == {ids[other]: [0, 1]}
    a2 = heartbeat(wire, group, a.member_id, 1, owned=parts(a))
    assert a2.error_code == 0 and a2.member_epoch == 2  # same partitions, new epoch
    a3 = heartbeat(wire, group, a.member_id, 2, topics=[kept, added], owned={ids[kept]: [0, 1]})
    assert a3.error_code == 0 and a3.member_epoch == 3
    assert parts(a3) == {ids[kept]: [0, 1], ids[added]: [0, 1]}
    return a, ids


def test_older_epoch_commit_for_partitions_held_since_then(tidelog_module_broker: BrokerHandle,
                                                           wire: KafkaWire) -> None:
    group = "ae-group"
    a, ids = grow_member(wire, group, "ae-kept", "ae-other", "ae-added")
    assert epochs_view(tidelog_module_broker, group, a.member_id) == (
        3, {ids["ae-kept"]: {0: 1, 1: 1}, ids["ae-added"]: {0: 3, 1: 3}}, {})
    # a commit at the member's previous epoch for a partition it has held since epoch 1: a lagging member
    assert commit(wire, group, a.member_id, 2, {("ae-kept", 0): 10}) == {("ae-kept", 0): 0}
    assert commit(wire, group, a.member_id, 1, {("ae-kept", 1): 11}) == {("ae-kept", 1): 0}  # two epochs back
    # a partition assigned at epoch 3 cannot have been consumed at epoch 2
    assert commit(wire, group, a.member_id, 2, {("ae-added", 0): 12}) == {("ae-added", 0): E.STALE_MEMBER_EPOCH}
    # a partition the member does not hold (b's)
    assert commit(wire, group, a.member_id, 2, {("ae-other", 0): 13}) == {("ae-other", 0): E.STALE_MEMBER_EPOCH}
    # one refused partition refuses the whole request, as Kafka's OffsetMetadataManager.commitOffset does
    assert commit(wire, group, a.member_id, 2, {("ae-kept", 0): 14, ("ae-added", 1): 15}) == {
        ("ae-kept", 0): E.STALE_MEMBER_EPOCH, ("ae-added", 1): E.STALE_MEMBER_EPOCH}
    # an epoch newer than the member's is refused; the current epoch commits every held partition
    assert commit(wire, group, a.member_id, 4, {("ae-kept", 0): 16}) == {("ae-kept", 0): E.STALE_MEMBER_EPOCH}
    assert commit(wire, group, a.member_id, 3, {("ae-added", 0): 17}) == {("ae-added", 0): 0}
    assert committed(wire, group) == {("ae-kept", 0): 10, ("ae-kept", 1): 11, ("ae-added", 0): 17}


def test_partitions_pending_revocation_keep_their_epoch(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    group = "pr-group"
    a, ids = grow_member(wire, group, "pr-kept", "pr-other", "pr-added")
    # a drops pr-kept from its subscription: it must revoke those partitions, staying at epoch 3
    r = heartbeat(wire, group, a.member_id, 3, topics=["pr-added"], owned={ids["pr-kept"]: [0, 1],
                                                                          ids["pr-added"]: [0, 1]})
    assert r.error_code == 0 and r.member_epoch == 3 and parts(r) == {ids["pr-added"]: [0, 1]}
    assert epochs_view(tidelog_module_broker, group, a.member_id) == (
        3, {ids["pr-added"]: {0: 3, 1: 3}}, {ids["pr-kept"]: {0: 1, 1: 1}})
    # a partition pending revocation is still the member's: its commit before revoking is a lagging one
    assert commit(wire, group, a.member_id, 2, {("pr-kept", 0): 20}) == {("pr-kept", 0): 0}
    assert commit(wire, group, a.member_id, 2, {("pr-added", 0): 21}) == {("pr-added", 0): E.STALE_MEMBER_EPOCH}
    # once revoked (the member moves to epoch 4), the partition is no longer the member's at any older epoch
    done = heartbeat(wire, group, a.member_id, 3, owned={ids["pr-added"]: [0, 1]})
    assert done.error_code == 0 and done.member_epoch == 4
    assert epochs_view(tidelog_module_broker, group, a.member_id) == (4, {ids["pr-added"]: {0: 3, 1: 3}}, {})
    assert commit(wire, group, a.member_id, 3, {("pr-kept", 1): 22}) == {("pr-kept", 1): E.STALE_MEMBER_EPOCH}
    assert commit(wire, group, a.member_id, 3, {("pr-added", 1): 23}) == {("pr-added", 1): 0}
    assert committed(wire, group) == {("pr-kept", 0): 20, ("pr-added", 1): 23}


def test_transactional_commits_stay_strict(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    """Kafka 4.3's commitTransactionalOffset checks each partition under the zero topic id, which no member holds:
    KIP-1251 lets no older epoch through there, and STALE_MEMBER_EPOCH is answered as ILLEGAL_GENERATION."""
    from tests.transactions.tv2_lib import end_txn_v5, init_v5

    group = "tx-group"
    a, _ = grow_member(wire, group, "tx-kept", "tx-other", "tx-added")
    tid = "tx-1251"
    producer = init_v5(wire, tid)
    Req = request_class(28)[5]
    T = Req.TxnOffsetCommitRequestTopic

    def txn_commit(epoch: int) -> int:
        resp = wire.request(28, 5, Req(
            transactional_id=tid, group_id=group, producer_id=producer.producer_id,
            producer_epoch=producer.epoch, generation_id=epoch, member_id=a.member_id, group_instance_id=None,
            topics=[T(name="tx-kept", partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])]))
        return int(resp.topics[0].partitions[0].error_code)

    assert txn_commit(2) == E.ILLEGAL_GENERATION  # held since epoch 1, yet refused in a transaction
    assert txn_commit(3) == 0
    assert end_txn_v5(wire, tid, producer, commit=False)[0] == 0


def test_classic_member_commits_stay_strict(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    """KIP-1251 relaxes only consumer-protocol members: a classic member of a consumer group commits with its
    generation, which must be its member epoch (ILLEGAL_GENERATION otherwise)."""
    group = "cl-group"
    create_topic(wire, "cl-topic", 1)
    a = join(wire, group, ["cl-topic"])
    jg = request_class(11)[5]
    proto = [jg.JoinGroupRequestProtocol(name="range", metadata=subscription(["cl-topic"]))]

    def classic_join(member_id: str) -> Any:
        return wire.request(11, 5, jg(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                      member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                      protocols=proto))

    first = classic_join("")
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = classic_join(first.member_id)
    assert joined.error_code == 0 and joined.generation_id > 1
    oc = request_class(8)[8]
    T = oc.OffsetCommitRequestTopic

    def classic_commit(generation: int) -> int:
        req = oc(group_id=group, generation_id_or_member_epoch=generation, member_id=joined.member_id,
                 group_instance_id=None, topics=[T(name="cl-topic", partitions=[T.OffsetCommitRequestPartition(
                     partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])])
        return int(wire.request(8, 8, req).topics[0].partitions[0].error_code)

    assert classic_commit(joined.generation_id - 1) == E.ILLEGAL_GENERATION
    assert classic_commit(joined.generation_id) == 0
    heartbeat(wire, group, a.member_id, -1)


def _uvarint(n: int) -> bytes:
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def _topic_partitions(topics: list[tuple[uuid.UUID, list[int], list[int] | None]]) -> bytes:
    """[]TopicPartitions laid out as Kafka writes them: TopicId, Partitions, then the tagged AssignmentEpochs
    (tag 0, a compact int32 array) when given."""
    out = _uvarint(len(topics) + 1)
    for topic_id, partitions, epochs in topics:
        out += topic_id.bytes + _uvarint(len(partitions) + 1) + b"".join(struct.pack(">i", p) for p in partitions)
        if epochs is None:
            out += _uvarint(0)
        else:
            body = _uvarint(len(epochs) + 1) + b"".join(struct.pack(">i", e) for e in epochs)
            out += _uvarint(1) + _uvarint(0) + _uvarint(len(body)) + body
    return out


def _current_assignment(epoch: int, previous: int, state: int,
                        assigned: list[tuple[uuid.UUID, list[int], list[int] | None]],
                        pending: list[tuple[uuid.UUID, list[int], list[int] | None]]) -> bytes:
    return struct.pack(">hiib", 0, epoch, previous, state) + _topic_partitions(assigned) + \
        _topic_partitions(pending) + _uvarint(0)


def test_current_assignment_record_layout() -> None:
    """The value is byte for byte Kafka's ConsumerGroupCurrentMemberAssignmentValue v0 with AssignmentEpochs."""
    t, u = sorted([uuid.uuid4(), uuid.uuid4()], key=str)
    v = cr.CurrentAssignmentValue(7, 6, 1, {t: {0: 3, 2: 7}, u: {1: 7}}, {t: {1: 3}})
    raw = _current_assignment(7, 6, 1, [(t, [0, 2], [3, 7]), (u, [1], [7])], [(t, [1], [3])])
    assert cr.encode_current_assignment(v) == raw
    assert cr.decode_current_assignment(raw) == v


def test_records_without_assignment_epochs_decode_at_the_member_epoch() -> None:
    """Utils.assignmentFromTopicPartitions: no AssignmentEpochs -> max(MemberEpoch, 0) for every partition."""
    t = uuid.uuid4()
    old = cr.decode_current_assignment(_current_assignment(5, 4, 1, [(t, [0, 1], None)], [(t, [2], None)]))
    assert (old.assigned, old.pending_revocation) == ({t: {0: 5, 1: 5}}, {t: {2: 5}})
    # a static member that left is stored at epoch -2: its partitions read as assigned at 0
    left = cr.decode_current_assignment(_current_assignment(-2, 3, 0, [(t, [0], None)], []))
    assert left.assigned == {t: {0: 0}}


def test_assignment_epochs_survive_restart_and_old_records_load(
        tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    b = tidelog_broker_factory(log_dir=tmp_path)
    group = "rs-group"
    with KafkaWire(b.bootstrap) as w:
        a, ids = grow_member(w, group, "rs-kept", "rs-other", "rs-added")
        before = epochs_view(b, group, a.member_id)
        assert before == (3, {ids["rs-kept"]: {0: 1, 1: 1}, ids["rs-added"]: {0: 3, 1: 3}}, {})
    b.restart()
    with KafkaWire(b.bootstrap) as w:
        assert epochs_view(b, group, a.member_id) == before
        assert commit(w, group, a.member_id, 2, {("rs-kept", 0): 30}) == {("rs-kept", 0): 0}
        assert commit(w, group, a.member_id, 2, {("rs-added", 0): 31}) == {("rs-added", 0): E.STALE_MEMBER_EPOCH}
    # a current-assignment record as a broker before 4.3 wrote it (no AssignmentEpochs), appended to the group's
    # __consumer_offsets partition: after a restart the member holds its partitions at its member epoch
    key = cr.encode_key(cr.ConsumerGroupKey(cr.CURRENT_MEMBER_ASSIGNMENT, group, a.member_id))
    value = _current_assignment(3, 2, 0, [(ids["rs-kept"], [0, 1], None), (ids["rs-added"], [0, 1], None)], [])
    cg = b.state.groups.consumer_groups
    assert b.call(lambda: cg.classic.manager._append(group, [(key, value)], for_commit=False)) == E.NONE
    b.restart()
    with KafkaWire(b.bootstrap) as w:
        assert epochs_view(b, group, a.member_id) == (3, {ids["rs-kept"]: {0: 3, 1: 3},
                                                          ids["rs-added"]: {0: 3, 1: 3}}, {})
        # without recorded epochs, only the member epoch itself is known to be safe
        assert commit(w, group, a.member_id, 2, {("rs-kept", 1): 32}) == {("rs-kept", 1): E.STALE_MEMBER_EPOCH}
        assert commit(w, group, a.member_id, 3, {("rs-kept", 1): 33}) == {("rs-kept", 1): 0}
        r = heartbeat(w, group, a.member_id, 3, owned={ids["rs-kept"]: [0, 1], ids["rs-added"]: [0, 1]})
        assert r.error_code == 0 and r.member_epoch == 3
        assert committed(w, group) == {("rs-kept", 0): 30, ("rs-kept", 1): 33}
