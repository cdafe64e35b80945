"""The share-state file is written off the event loop (tidelog.metadata.writer), on raw-wire ShareFetch /
ShareAcknowledge / ShareGroupHeartbeat: an acknowledgement is answered only once it is on disk, the loop serves
other requests while a write is held on the writer thread, acknowledgements arriving meanwhile share one write
(counted by the writer, not timed), shutdown writes what was written behind, and an answered acknowledgement
survives kill -9 while one cut short by a crash at the write step is not answered and not kept."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from tests.groups.test_share_admin import create_topic, describe_offsets, offsets
from tests.groups.test_share_groups import (
    acquired,
    earliest,
    heartbeat,
    joined,
    member,
    produce,
    share_ack,
    share_fetch,
)
from tests.groups.write_gate import WAIT_S, WriteGate, wait_until
from tidelog.clock import ManualClock
from tidelog.metadata.files import SHARE_STATE
from tidelog.metadata.writer import MetadataFaultPoint
from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, BrokerProcess, KafkaWire

ACCEPT = 1
SHARE_DESCRIBE = 77


def saved_epoch(log_dir: str | Path, group: str) -> int | None:
    """The group epoch the file on disk holds now (None: the group is not in the file)."""
    groups = SHARE_STATE.read(log_dir, lambda d: dict(d["groups"])) or {}
    return None if group not in groups else int(groups[group]["group_epoch"])


def saved_start(log_dir: str | Path, group: str, topic_id: bytes, partition: int) -> int | None:
    """The start offset the file on disk holds now for the share-partition (None: not in the file)."""
    groups = SHARE_STATE.read(log_dir, lambda d: dict(d["groups"])) or {}
    state = groups.get(group, {}).get("partitions", {}).get(f"{topic_id.hex()}:{partition}")
    return None if state is None else int(state["start_offset"])


def ack_codes(response: Any) -> list[int]:
    return [p.error_code for t in response.responses for p in t.partitions]


def starts(wire: KafkaWire) -> dict[int, int]:
    """The start offsets DescribeShareGroupOffsets reports (what is on disk) for partitions 0 and 5 of shs-acks."""
    found = offsets(describe_offsets(wire, "shs-g", {"shs-acks": [0, 5]}))
    return {p: start for (_, p), (start, _, _) in found.items()}


def test_acknowledgements_share_one_write_and_are_answered_once_on_disk(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    gate = WriteGate(SHARE_STATE.name)
    b = tidelog_broker_factory(log_dir=tmp_path, fault_hooks=gate)
    writer = b.state.groups.share_groups.store.writer
    topic_id = b.create_topic("shs-acks", 9)
    earliest(b, "shs-g")
    for p in range(9):
        produce(b, "shs-acks", 1, partition=p)
    members: list[str] = []
    wires = [KafkaWire(b.bootstrap) for _ in range(9)]  # a share session lives as long as its connection
    try:
        for p, w in enumerate(wires):  # member p holds the one record of partition p, in its session (epoch 1 next)
            members.append(joined(w, "shs-g", "shs-acks"))
            assert acquired(share_fetch(w, "shs-g", members[p], 0, {topic_id: [p]})) == {p: [(0, 0, 1)]}
        wait_until(lambda: b.call(lambda: writer.pending) == 0, "the joins are on disk")
        writes = b.call(lambda: writer.writes)
        gate.close()
        answers: dict[int, tuple[list[int], int | None]] = {}  # partition -> (ack codes, start offset on disk then)

        def ack(p: int) -> None:
            with wires[p] as w:
                r = share_ack(w, "shs-g", members[p], 1, {(topic_id, p): [(0, 0, [ACCEPT])]})
                answers[p] = (ack_codes(r), saved_start(tmp_path, "shs-g", topic_id, p))

        first = threading.Thread(target=ack, args=(0,))
        first.start()
        assert gate.reached.wait(WAIT_S)  # the first write is held on the writer thread
        others = [threading.Thread(target=ack, args=(p,)) for p in range(1, 9)]
        for t in others:
            t.start()
        wait_until(lambda: b.call(lambda: writer.pending) == 9, "nine acknowledgements wait for the disk")
        with KafkaWire(b.bootstrap) as w:  # the loop answers another connection while the disk is held
            # DescribeShareGroupOffsets reports what is on disk: nothing acknowledged yet
            assert starts(w) == {0: 0, 5: 0}
        assert answers == {} and b.call(lambda: writer.writes) == writes
        gate.open()
        for t in [first, *others]:
            t.join(WAIT_S)
        assert answers == {p: ([E.NONE], 1) for p in range(9)}  # each answered with its acknowledgement on disk
        # the held write, then one for the other eight
        assert b.call(lambda: (writer.writes - writes, writer.pending)) == (2, 0)
        with KafkaWire(b.bootstrap) as w:
            assert starts(w) == {0: 1, 5: 1}
    finally:
        for w in wires:
            w.close()


def share_describe_epoch(wire: KafkaWire, group: str) -> int:
    cls = request_class(SHARE_DESCRIBE)[1]
    groups = wire.request(SHARE_DESCRIBE, 1, cls(group_ids=[group], include_authorized_operations=False)).groups
    assert groups[0].error_code == 0, groups[0]
    return int(groups[0].group_epoch)


def test_shutdown_writes_what_was_written_behind(tmp_path: Path,
                                                 tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A member whose session timed out leaves when the group is next described, a change written behind (no
    request waits for it); a restart while that write is held on the writer thread writes it during shutdown."""
    clock, gate = ManualClock(), WriteGate(SHARE_STATE.name)
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock, fault_hooks=gate)
    b.create_topic("shs-expire", 1)
    with KafkaWire(b.bootstrap) as w:
        joined(w, "shs-expire-g", "shs-expire")
        epoch = share_describe_epoch(w, "shs-expire-g")
    writer = b.state.groups.share_groups.store.writer
    wait_until(lambda: b.call(lambda: writer.pending) == 0, "the join is on disk")
    gate.close()
    clock.advance(45_001)  # group.share.session.timeout.ms
    with KafkaWire(b.bootstrap) as w:
        assert share_describe_epoch(w, "shs-expire-g") == epoch + 1  # the member left
    assert gate.reached.wait(WAIT_S)
    # the shutdown writes it while that write is held, then joins the writer thread: the gate opens once the file
    # shows the new epoch (only the shutdown can have written it)
    opener = gate.open_when(lambda: saved_epoch(tmp_path, "shs-expire-g") == epoch + 1)
    try:
        b.restart()
        assert opener.met, "the shutdown did not write the expiry while its write was held"
        assert gate.holder is not None and not gate.holder.is_alive()  # the old writer thread was joined
        with KafkaWire(b.bootstrap) as w:
            assert share_describe_epoch(w, "shs-expire-g") == epoch + 1
    finally:
        gate.open()
        opener.join(WAIT_S)


def test_an_answered_acknowledgement_survives_kill_9_and_a_crash_mid_write_is_not_answered(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data")
    handle = cast(Any, proc)  # the helpers below use only its bootstrap
    with proc:
        with KafkaWire(proc.bootstrap) as w:
            topic_id = create_topic(w, "shs-kill", 1).bytes
        earliest(handle, "shs-kill-g")
        produce(handle, "shs-kill", 4)
        with KafkaWire(proc.bootstrap) as w:
            m = joined(w, "shs-kill-g", "shs-kill")
            assert acquired(share_fetch(w, "shs-kill-g", m, 0, {topic_id: [0]})) == {0: [(0, 3, 1)]}
            assert ack_codes(share_ack(w, "shs-kill-g", m, 1, {(topic_id, 0): [(0, 1, [ACCEPT])]})) == [E.NONE]
        proc.restart(kill=True)  # SIGKILL right after the answer
        proc.stop()
        proc.args = ["--crash-at", str(MetadataFaultPoint.WRITE)]  # exit at once when a metadata write begins
        proc.start()
        with KafkaWire(proc.bootstrap) as w:
            # a ShareFetch writes nothing (acquisitions are not persisted): 0-1 stayed acknowledged
            fresh = member()
            assert acquired(share_fetch(w, "shs-kill-g", fresh, 0, {topic_id: [0]})) == {0: [(2, 3, 1)]}
            with pytest.raises((EOFError, ConnectionError)):
                share_ack(w, "shs-kill-g", fresh, 1, {(topic_id, 0): [(2, 2, [ACCEPT])]})  # never answered
        assert proc.proc is not None and proc.proc.wait(WAIT_S) == 137
        proc.args = []
        proc.start()
        with KafkaWire(proc.bootstrap) as w:
            again = joined(w, "shs-kill-g", "shs-kill")
            assert acquired(share_fetch(w, "shs-kill-g", again, 0, {topic_id: [0]})) == {0: [(2, 3, 1)]}


def test_group_and_offset_changes_are_answered_once_on_disk(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """ShareGroupHeartbeat (a join), AlterShareGroupOffsets and DeleteGroups answer with their change on disk."""
    b = tidelog_broker_factory(log_dir=tmp_path)
    topic_id = b.create_topic("shs-admin", 1)

    def saved() -> dict[str, Any]:
        return SHARE_STATE.read(tmp_path, lambda d: dict(d["groups"])) or {}

    with KafkaWire(b.bootstrap) as w:
        m = joined(w, "shs-admin-g", "shs-admin")
        assert saved()["shs-admin-g"]["group_epoch"] == 1
        assert heartbeat(w, "shs-admin-g", m, -1).error_code == 0
        assert saved()["shs-admin-g"]["group_epoch"] == 2
        cls = request_class(91)[0]
        T = cls.AlterShareGroupOffsetsRequestTopic
        r = w.request(91, 0, cls(group_id="shs-admin-g", topics=[T(topic_name="shs-admin", partitions=[
            T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=7)])]))
        assert r.error_code == 0
        assert saved_start(tmp_path, "shs-admin-g", topic_id, 0) == 7
        d = w.request(42, 2, request_class(42)[2](groups_names=["shs-admin-g"]))
        assert d.results[0].error_code == E.NONE
        assert "shs-admin-g" not in saved()


def test_share_fetch_moves_the_session_epoch_on_before_it_waits_for_the_disk(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A second ShareFetch at the epoch of one waiting for its acknowledgement's write is refused
    INVALID_SHARE_SESSION_EPOCH; the first, its write failing, answers the acknowledgement UNKNOWN_SERVER_ERROR and
    the session stays moved on (Kafka's newContext). A join whose write fails with a bug's exception is answered
    UNKNOWN_SERVER_ERROR naming it."""
    gate = WriteGate(SHARE_STATE.name)
    b = tidelog_broker_factory(log_dir=tmp_path, fault_hooks=gate)
    topic_id = b.create_topic("shs-epoch", 1)
    earliest(b, "shs-epoch-g")
    produce(b, "shs-epoch", 2)
    with KafkaWire(b.bootstrap) as w, KafkaWire(b.bootstrap) as other:
        gate.failing = RuntimeError("injected by the test")
        failed = heartbeat(w, "shs-epoch-g", member(), topics=["shs-epoch"])
        assert failed.error_code == E.UNKNOWN_SERVER_ERROR and "RuntimeError" in failed.error_message
        m = joined(w, "shs-epoch-g", "shs-epoch")
        assert acquired(share_fetch(w, "shs-epoch-g", m, 0, {topic_id: [0]})) == {0: [(0, 1, 1)]}
        gate.close()
        gate.failing = OSError("injected by the test")
        answers: list[Any] = []
        first = threading.Thread(target=lambda: answers.append(share_fetch(
            w, "shs-epoch-g", m, 1, {topic_id: [0]}, acks={(topic_id, 0): [(0, 1, [ACCEPT])]})))
        first.start()
        try:
            assert gate.reached.wait(WAIT_S)  # the acknowledgement's write is held
            again = share_fetch(other, "shs-epoch-g", m, 1, {topic_id: [0]})
            assert again.error_code == E.INVALID_SHARE_SESSION_EPOCH
        finally:
            gate.open()
            first.join(WAIT_S)
        [answer] = answers
        assert answer.error_code == E.NONE
        assert [p.acknowledge_error_code for t in answer.responses for p in t.partitions] == [E.UNKNOWN_SERVER_ERROR]
        assert share_fetch(w, "shs-epoch-g", m, 1, {topic_id: [0]}).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert share_fetch(w, "shs-epoch-g", m, 2, {topic_id: [0]}).error_code == E.NONE
