"""The streams-group file is written off the event loop (tidelog.metadata.writer), on raw-wire
StreamsGroupHeartbeat: a heartbeat is answered only once the state it shows is on disk, the loop serves other
requests while a write is held on the writer thread, heartbeats arriving meanwhile share one write (counted by the
writer, not timed), shutdown writes what a timer changed, and what was answered survives kill -9 while a crash in
the middle of a write leaves the last answered state."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.groups.test_delete_groups_v3 import commit_offset, delete_groups
from tests.groups.test_share_groups import heartbeat as share_heartbeat
from tests.groups.test_share_groups import joined
from tests.groups.test_share_store import saved_epoch, share_describe_epoch
from tests.groups.write_gate import WAIT_S, WriteGate, wait_until
from tidelog.clock import ManualClock
from tidelog.metadata.files import SHARE_STATE, STREAMS_GROUPS
from tidelog.metadata.writer import MetadataFaultPoint
from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, BrokerProcess, KafkaWire

from .test_streams_groups import NO_DELAY, create_topic, describe, hb, tasks, topology


def saved_groups(log_dir: str | Path) -> dict[str, Any]:
    """The streams groups as the file on disk holds them now."""
    return STREAMS_GROUPS.read(log_dir, lambda d: dict(d["groups"])) or {}


def held_broker(tmp_path: Path, factory: Callable[..., BrokerHandle], topic: str) -> tuple[BrokerHandle, WriteGate, Any]:
    """A broker on `tmp_path` with `topic` created and the streams-group writer's next write held at the gate:
    (broker, gate, writer)."""
    gate = WriteGate(STREAMS_GROUPS.name)
    b = factory(log_dir=tmp_path, overrides=NO_DELAY, fault_hooks=gate)
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, topic, 1)
    gate.close()
    return b, gate, b.state.groups.streams_groups.store.writer


def test_heartbeats_share_one_write_and_are_answered_once_on_disk(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    b, gate, writer = held_broker(tmp_path, tidelog_broker_factory, "ss-src")
    answers: dict[str, tuple[int, bool]] = {}  # group -> (error, was it in the file when the answer came)

    def join(group: str) -> None:
        with KafkaWire(b.bootstrap) as w:
            r = hb(w, group, "m", 0, process=group, topo=topology(group, "ss-src"))
            answers[group] = (r.error_code, group in saved_groups(tmp_path))

    first = threading.Thread(target=join, args=("ss-0",))
    first.start()
    assert gate.reached.wait(WAIT_S)  # the first write is held on the writer thread
    others = [threading.Thread(target=join, args=(f"ss-{i}",)) for i in range(1, 9)]
    for t in others:
        t.start()
    wait_until(lambda: b.call(lambda: writer.pending) == 9, "nine joins wait for the disk")
    with KafkaWire(b.bootstrap) as w:  # the loop serves requests while the disk is held
        assert describe(w, "ss-5").members[0].member_id == "m"
    assert answers == {} and b.call(lambda: writer.writes) == 0
    gate.open()
    for t in [first, *others]:
        t.join(WAIT_S)
    assert answers == {f"ss-{i}": (0, True) for i in range(9)}
    assert b.call(lambda: (writer.writes, writer.pending)) == (2, 0)  # the held write, then one for the other 8
    assert set(saved_groups(tmp_path)) == set(answers)


def test_shutdown_writes_what_a_timer_changed(tmp_path: Path,
                                              tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A member fenced by its session timeout is written behind (no request waits for it); a restart while that
    write is still held on the writer thread writes it during the shutdown."""
    clock, gate = ManualClock(), WriteGate(STREAMS_GROUPS.name)
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock, overrides=NO_DELAY, fault_hooks=gate)
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "ss-expire", 1)
        a = hb(w, "expire", "A", 0, process="pa", topo=topology("expire", "ss-expire"))
        hb(w, "expire", "B", 0, process="pb", topo=topology("expire", "ss-expire"))
        clock.advance(30_000)
        a = hb(w, "expire", "A", a.member_epoch)  # A's session runs 45 s from now; B's ends in 15 s
        assert a.error_code == 0
    streams = b.state.groups.streams_groups
    before = saved_groups(tmp_path)["expire"]
    assert set(before["members"]) == {"A", "B"}
    gate.close()
    clock.advance(15_001)
    b.call(streams.check_expirations)
    assert gate.reached.wait(WAIT_S)
    assert set(saved_groups(tmp_path)["expire"]["members"]) == {"A", "B"}  # still held
    # the shutdown writes it while that write is held, then joins the writer thread: the gate opens once the file
    # shows the fence (only the shutdown can have written it), and the held write then leaves the file alone
    opener = gate.open_when(lambda: set(saved_groups(tmp_path)["expire"]["members"]) == {"A"})
    try:
        b.restart()
        assert opener.met, "the shutdown did not write the fence while the timer's write was held"
        assert gate.holder is not None and not gate.holder.is_alive()  # the old writer thread was joined
        with KafkaWire(b.bootstrap) as w:
            after = describe(w, "expire")
        assert [m.member_id for m in after.members] == ["A"]
        assert after.group_epoch == before["group_epoch"] + 1
    finally:
        gate.open()
        opener.join(WAIT_S)
    assert set(saved_groups(tmp_path)["expire"]["members"]) == {"A"}  # the held write did not go back in time


def test_answered_state_survives_kill_9_and_a_crash_mid_write_leaves_the_last_answered(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", overrides=NO_DELAY)
    with proc:
        with KafkaWire(proc.bootstrap) as w:
            create_topic(w, "ss-kill", 2)
            r = hb(w, "kill", "K", 0, process="pk", topo=topology("kill", "ss-kill"))
            r = hb(w, "kill", "K", r.member_epoch, active={})
            assert r.error_code == 0 and tasks(r.active_tasks)
            before = describe(w, "kill")
        proc.restart(kill=True)  # SIGKILL right after the answer
        with KafkaWire(proc.bootstrap) as w:
            after = describe(w, "kill")
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert [(m.member_id, m.member_epoch) for m in after.members] == [("K", r.member_epoch)]
        proc.stop()
        proc.args = ["--crash-at", str(MetadataFaultPoint.WRITE)]  # exit at once when a write begins
        proc.start()
        with KafkaWire(proc.bootstrap) as w, pytest.raises((EOFError, ConnectionError)):
            hb(w, "kill", "J", 0, process="pj", topo=topology("kill", "ss-kill"))  # never answered
        assert proc.proc is not None and proc.proc.wait(WAIT_S) == 137
        proc.args = []
        proc.start()
        with KafkaWire(proc.bootstrap) as w:
            again = describe(w, "kill")
            assert [(m.member_id, m.member_epoch) for m in again.members] == [("K", r.member_epoch)]
            assert again.group_epoch == before.group_epoch
            beat = hb(w, "kill", "K", r.member_epoch, active=tasks(r.active_tasks))
            assert (beat.error_code, beat.member_epoch) == (E.NONE, r.member_epoch)
            assert w.request(42, 2, request_class(42)[2](groups_names=["kill"])).results[0].error_code == \
                E.NON_EMPTY_GROUP


def test_a_failed_write_fails_only_the_changes_it_carried_and_is_retried(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """The held write fails with a bug's exception (not an OSError): its heartbeat is answered
    UNKNOWN_SERVER_ERROR naming the exception type; a heartbeat noted after that write began waits for the retry
    and is answered NONE; the retry writes both (the failed change was kept in memory)."""
    b, gate, writer = held_broker(tmp_path, tidelog_broker_factory, "ss-fail")
    gate.failing = RuntimeError("injected by the test")
    answers: dict[str, tuple[int, str | None]] = {}

    def join(group: str) -> None:
        with KafkaWire(b.bootstrap) as w:
            r = hb(w, group, "m", 0, process=group, topo=topology(group, "ss-fail"))
            answers[group] = (r.error_code, r.error_message)

    first = threading.Thread(target=join, args=("sf-0",))
    first.start()
    assert gate.reached.wait(WAIT_S)
    second = threading.Thread(target=join, args=("sf-1",))
    second.start()
    wait_until(lambda: b.call(lambda: writer.pending) == 2, "the second join waits for the disk")
    gate.open()
    for t in (first, second):
        t.join(WAIT_S)
    code, message = answers["sf-0"]
    assert code == E.UNKNOWN_SERVER_ERROR and message is not None and "RuntimeError" in message
    assert answers["sf-1"] == (E.NONE, None)
    assert set(saved_groups(tmp_path)) == {"sf-0", "sf-1"}
    assert b.call(lambda: (writer.pending, writer.failures)) == (0, 0)


def test_an_unwritable_file_fails_the_heartbeat_keeps_the_change_and_retries_timer_changes(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle], caplog: pytest.LogCaptureFixture) -> None:
    """With the file unwritable (a directory in its place: a real OSError), a join is answered
    UNKNOWN_SERVER_ERROR but kept in memory (no Kafka-style revert); a session expiry (a timer's change, no request
    waits for it) is retried on the writer's backoff with no request to drive it, logged once for the whole
    streak, and lands once the file is writable again."""
    clock = ManualClock()
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock, overrides=NO_DELAY)
    streams = b.state.groups.streams_groups
    writer = streams.store.writer
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "ss-disk", 1)
        a = hb(w, "disk", "A", 0, process="pa", topo=topology("disk", "ss-disk"))
        assert hb(w, "disk", "B", 0, process="pb", topo=topology("disk", "ss-disk")).error_code == E.NONE
        clock.advance(30_000)
        assert hb(w, "disk", "A", a.member_epoch).error_code == E.NONE  # A's session runs 45 s from now
        path = STREAMS_GROUPS.path(tmp_path)
        path.unlink()
        path.mkdir()
        caplog.set_level(logging.INFO, logger="tidelog.metadata.writer")
        failed = hb(w, "disk", "C", 0, process="pc", topo=topology("disk", "ss-disk"))
        assert failed.error_code == E.UNKNOWN_SERVER_ERROR
        assert failed.error_message.startswith("Cannot write the streams-group state")
        assert {m.member_id for m in describe(w, "disk").members} == {"A", "B", "C"}  # C kept in memory
    clock.advance(15_001)  # B's session ends
    b.call(streams.check_expirations)
    wait_until(lambda: b.call(lambda: writer.failures) >= 3, "the write was retried three times")
    cannot = [r for r in caplog.records if r.name == "tidelog.metadata.writer" and "Cannot write" in r.getMessage()]
    assert len(cannot) == 1  # once per streak, not per attempt
    path.rmdir()
    wait_until(lambda: set(saved_groups(tmp_path).get("disk", {}).get("members", {})) == {"A", "C"},
               "the retry wrote C's join and B's expiry")
    wait_until(lambda: b.call(lambda: (writer.pending, writer.failures)) == (0, 0), "the loop saw the write")
    wrote = [r for r in caplog.records if r.name == "tidelog.metadata.writer" and "failed attempt" in r.getMessage()]
    assert len(wrote) == 1


def test_delete_groups_answers_a_failed_write_only_for_the_groups_it_carried(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """One DeleteGroups for a classic, an empty and a busy streams group and an empty share group while the
    streams file cannot be written: every deletion is made; only the deleted streams group is answered
    UNKNOWN_SERVER_ERROR (its deletion kept in memory, no Kafka-style revert, and written by the retry once the
    file can be); the other answers stand."""
    b = tidelog_broker_factory(log_dir=tmp_path, overrides=NO_DELAY)
    writer = b.state.groups.streams_groups.store.writer
    path = STREAMS_GROUPS.path(tmp_path)
    with KafkaWire(b.bootstrap) as w, KafkaWire(b.bootstrap) as share:
        create_topic(w, "dg-topic", 1)
        commit_offset(w, "dg-classic")
        assert hb(w, "dg-empty", "m", 0, process="pe", topo=topology("dg-empty", "dg-topic")).error_code == E.NONE
        assert hb(w, "dg-empty", "m", -1).error_code == E.NONE  # left: the group stays, empty
        assert hb(w, "dg-busy", "m", 0, process="pb", topo=topology("dg-busy", "dg-topic")).error_code == E.NONE
        m = joined(share, "dg-share", "dg-topic")
        assert share_heartbeat(share, "dg-share", m, -1).error_code == E.NONE
        wait_until(lambda: b.call(lambda: writer.pending) == 0, "the streams groups are on disk")
        path.unlink()
        path.mkdir()
        got = delete_groups(w, 3, ["dg-classic", "dg-empty", "dg-busy", "dg-share"])
        code, message = got.pop("dg-empty")
        assert code == E.UNKNOWN_SERVER_ERROR and message is not None and message.startswith("Cannot write")
        assert got == {"dg-classic": (E.NONE, None), "dg-busy": (E.NON_EMPTY_GROUP, None),
                       "dg-share": (E.NONE, None)}
        assert "dg-share" not in (SHARE_STATE.read(tmp_path, lambda d: dict(d["groups"])) or {})
        # the deletion was kept: the group is gone
        assert delete_groups(w, 3, ["dg-empty"]) == {"dg-empty": (E.GROUP_ID_NOT_FOUND, None)}
    path.rmdir()
    wait_until(lambda: "dg-empty" not in saved_groups(tmp_path) and "dg-busy" in saved_groups(tmp_path),
               "the retry wrote the deletion")


def test_a_failed_streams_flush_at_shutdown_does_not_skip_the_share_flush(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle], caplog: pytest.LogCaptureFixture) -> None:
    """The streams file cannot be written when the broker shuts down: that step fails (logged), and the share
    state's flush after it still writes what a timer changed and was held on its writer thread."""
    clock, gate = ManualClock(), WriteGate(SHARE_STATE.name)
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock, overrides=NO_DELAY, fault_hooks=gate)
    path = STREAMS_GROUPS.path(tmp_path)
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "sd-topic", 1)
        assert hb(w, "sd", "A", 0, process="pa", topo=topology("sd", "sd-topic")).error_code == E.NONE
        joined(w, "sd-share", "sd-topic")
        epoch = share_describe_epoch(w, "sd-share")
        wait_until(lambda: b.call(lambda: b.state.groups.share_groups.store.writer.pending) == 0, "the join on disk")
        path.unlink()
        path.mkdir()
        assert hb(w, "sd", "B", 0, process="pb", topo=topology("sd", "sd-topic")).error_code == E.UNKNOWN_SERVER_ERROR
        gate.close()
        clock.advance(45_001)  # the share member's session ends: it leaves when the group is next described
        assert share_describe_epoch(w, "sd-share") == epoch + 1
    assert gate.reached.wait(WAIT_S)

    def share_flushed() -> bool:
        if saved_epoch(tmp_path, "sd-share") != epoch + 1:
            return False
        path.rmdir()  # lets the next broker start (the streams write was never made)
        return True

    opener = gate.open_when(share_flushed)
    try:
        b.restart()
    finally:
        gate.open()
        opener.join(WAIT_S)
    assert opener.met, "the share flush did not run"
    assert any("Shutting down the streams groups failed" in r.getMessage() for r in caplog.records)
    with KafkaWire(b.bootstrap) as w:
        assert share_describe_epoch(w, "sd-share") == epoch + 1
