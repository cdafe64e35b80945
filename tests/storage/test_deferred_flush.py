"""Deferred flush (the Produce path with log.flush.on.append / flush.messages): the append is written but stays
invisible (HW, listeners) until the caller has fsynced it off the event loop and exposed it."""

from __future__ import annotations

from pathlib import Path

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.records import Record, build_batch
from tidelog.storage import TopicPartition
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.storage.log import Log

TP = TopicPartition("deferred", 0)


def batch(n: int = 1) -> bytes:
    return bytes(build_batch([Record(i, 1_700_000_000_000, b"k", b"v") for i in range(n)], 0))


class CountFsync:
    def __init__(self) -> None:
        self.calls: list[object] = []

    def at(self, point: FaultPoint, subject: object = None) -> None:
        if point == FaultPoint.FSYNC:
            self.calls.append(subject)


def open_log(path: Path, clock: ManualClock, config: LogConfig | None = None, **kw: object) -> Log:
    return Log.load(path / "deferred-0", TP, config or LogConfig(), clock, bytes(range(16)), **kw)


def test_flush_on_append_is_left_to_the_caller(tmp_path: Path, clock: ManualClock) -> None:
    hooks = CountFsync()
    lg = open_log(tmp_path, clock, flush_on_append=True, fault_hooks=hooks)
    woken: list[int] = []
    lg.add_append_listener(lambda log_: woken.append(log_.high_watermark))
    info = lg.append_as_leader(batch(2), defer_flush=True)
    assert info.flush_required and (info.first_offset, info.last_offset) == (0, 1)
    assert (lg.log_end_offset, lg.high_watermark, lg.recovery_point) == (2, 0, 0)
    assert lg.read(0, 1 << 20, lg.high_watermark, True) == b"" and woken == [] and hooks.calls == []
    lg.flush_appended(info)                      # a worker thread in the broker
    assert lg.recovery_point == 2 and hooks.calls == [TP] and lg.high_watermark == 0
    lg.expose_flushed(info)                      # back on the loop
    assert lg.high_watermark == 2 and woken == [2]
    # without defer_flush the append syncs inline and is visible at once
    plain = lg.append_as_leader(batch(1))
    assert not plain.flush_required and lg.high_watermark == 3 and hooks.calls == [TP, TP]


def test_flush_messages_policy_and_markers_defer_too(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock, LogConfig(flush_messages=2))
    first = lg.append_as_leader(batch(1), defer_flush=True)
    assert not first.flush_required and lg.high_watermark == 1   # policy not due yet
    second = lg.append_as_leader(batch(1), defer_flush=True)
    assert second.flush_required and lg.high_watermark == 1
    lg.flush_appended(second)
    lg.expose_flushed(second)
    assert (lg.high_watermark, lg.recovery_point) == (2, 2)
    lg.append_as_leader(bytes(build_batch([Record(0, 1_700_000_000_000, b"t", b"v")], 0, producer_id=5,
                                          producer_epoch=0, base_sequence=0, is_transactional=True)))
    marker = lg.append_control_marker(5, 0, 0, commit=True, defer_flush=True)
    assert marker.flush_required and lg.last_stable_offset == 3   # the HW (3) holds the marker (3) back
    lg.flush_appended(marker)
    lg.expose_flushed(marker)
    assert lg.last_stable_offset == lg.high_watermark == lg.log_end_offset == 4
