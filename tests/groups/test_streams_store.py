"""The streams-group file is written off the event loop (tidelog.metadata.writer), on raw-wire
StreamsGroupHeartbeat: a heartbeat is answered only once the state it shows is on disk, the loop serves other
requests while a write is held on the writer thread, heartbeats arriving meanwhile share one write (counted by the
writer, not timed), shutdown writes what a timer changed, and what was answered survives kill -9 while a crash in
the middle of a write leaves the last answered state."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.clock import ManualClock
from tidelog.metadata.files import STREAMS_GROUPS
from tidelog.metadata.writer import MetadataFaultPoint
from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, BrokerProcess, KafkaWire

from .test_streams_groups import NO_DELAY, create_topic, describe, hb, tasks, topology

WAIT_S = 60.0


class WriteGate:
    """Fault hooks holding the streams-group file's writer thread at its write step while closed."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.opened.set()
        self.reached = threading.Event()

    def at(self, point: object, subject: object = None) -> None:
        if point == MetadataFaultPoint.WRITE and subject == STREAMS_GROUPS.name:
            self.reached.set()
            assert self.opened.wait(WAIT_S), "the gate was never opened"

    def close(self) -> None:
        self.reached.clear()
        self.opened.clear()

    def open(self) -> None:
        self.opened.set()


def saved_groups(log_dir: str | Path) -> dict[str, Any]:
    """The streams groups as the file on disk holds them now."""
    return STREAMS_GROUPS.read(log_dir, lambda d: dict(d["groups"])) or {}


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.01)


def test_heartbeats_share_one_write_and_are_answered_once_on_disk(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    gate = WriteGate()
    b = tidelog_broker_factory(log_dir=tmp_path, overrides=NO_DELAY, fault_hooks=gate)
    writer = b.state.groups.streams_groups.store.writer
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "ss-src", 1)
    gate.close()
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
    clock, gate = ManualClock(), WriteGate()
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
    try:
        b.restart()  # the shutdown writes it; the new broker loads it before the gate opens
        with KafkaWire(b.bootstrap) as w:
            after = describe(w, "expire")
        assert [m.member_id for m in after.members] == ["A"]
        assert after.group_epoch == before["group_epoch"] + 1
    finally:
        gate.open()
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
