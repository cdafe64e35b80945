"""Retention by time and size, log-start breaches and DeleteRecords (docs/STORAGE.md-§2), on real logs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cleaner"))

from cleaner_env import Env, produce  # noqa: E402

from tidelog.clock import ManualClock  # noqa: E402
from tidelog.config.log_config import LogConfig  # noqa: E402
from tidelog.protocol.errors import ErrorCode, KafkaError  # noqa: E402
from tidelog.storage.retention import RetentionTask, delete_old_segments, delete_records  # noqa: E402

DELETE = LogConfig(retention_ms=10_000, segment_bytes=1024 * 1024, file_delete_delay_ms=1000)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    e = Env(tmp_path / "data", ManualClock())
    yield e
    e.close()


def fill(log, n: int, per_segment: int = 1) -> None:  # noqa: ANN001
    for i in range(n):
        produce(log, f"k{i}", "x" * 100)
        if (i + 1) % per_segment == 0:
            log.roll()


def bases(log) -> list[int]:  # noqa: ANN001
    return [s.base_offset for s in log.segments]


def test_time_retention_deletes_whole_old_segments_only(env: Env) -> None:
    log = env.log(config=DELETE)
    fill(log, 2, per_segment=2)  # segment 0: offsets 0-1, old
    env.clock.advance(20_000)
    fill(log, 2, per_segment=2)  # segment 2: offsets 2-3, young
    produce(log, "tail", "t")  # active segment 4
    assert bases(log) == [0, 2, 4]
    env.clock.advance(5_000)  # segment 0 is 25 s old, segment 2 is 5 s old
    assert delete_old_segments(log, env.clock.milliseconds()) == 1
    assert bases(log) == [2, 4]
    assert log.log_start_offset == 2
    # old files are renamed .deleted and unlinked after file.delete.delay.ms
    assert (log.dir / "00000000000000000000.log.deleted").exists()
    env.clock.advance(1000)
    env.manager.run_scheduled_deletions()
    assert not (log.dir / "00000000000000000000.log.deleted").exists()


def test_time_retention_can_expire_the_active_segment(env: Env) -> None:
    log = env.log(config=DELETE)
    produce(log, "a", "1")
    produce(log, "b", "2")
    env.clock.advance(60_000)
    assert delete_old_segments(log, env.clock.milliseconds()) == 1
    assert bases(log) == [2]  # rolled a new empty active segment at LEO first
    assert log.log_start_offset == 2 and log.log_end_offset == 2


def test_size_retention(env: Env) -> None:
    log = env.log(config=DELETE.with_values(retention_ms=-1))
    fill(log, 4)  # four one-batch segments
    produce(log, "tail", "t")
    seg_size = log.segments.first_segment.size
    total = log.size_in_bytes()
    log.update_config(log.config.with_values(retention_bytes=total - 2 * seg_size))
    assert delete_old_segments(log, env.clock.milliseconds()) == 2
    assert bases(log) == [2, 3, 4]
    log.update_config(log.config.with_values(retention_bytes=total))  # under the limit: nothing
    assert delete_old_segments(log, env.clock.milliseconds()) == 0


def test_compacted_log_is_skipped_by_the_retention_task(env: Env) -> None:
    compact_delete = DELETE.with_values(cleanup_policy=("compact", "delete"))
    plain = env.log("plain", DELETE)
    compacted = env.log("both", compact_delete)
    for log in (plain, compacted):
        produce(log, "a", "1")
        log.roll()
        produce(log, "b", "2")
    env.clock.advance(60_000)
    task = RetentionTask(env.manager.all_logs, env.clock, 300_000, cleaner=env.cleaner)
    assert task.cleanup_logs() >= 1
    assert bases(plain)[0] > 0
    assert bases(compacted)[0] == 0
    # ... the cleaner threads apply it instead (§3.1 step 3)
    env.cleaner.clean_once()
    assert bases(compacted)[0] > 0


def test_delete_records_moves_log_start_and_earliest_offset(env: Env) -> None:
    log = env.log(config=DELETE)
    fill(log, 6, per_segment=2)
    assert delete_records(log, 3) == 3
    assert log.log_start_offset == 3
    assert bases(log) == [2, 4, 6]  # segment 0 wholly below 3 is gone; 2 still holds offset 3
    with pytest.raises(KafkaError) as exc:
        log.read(1, 1000, log.high_watermark, True)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError) as exc:
        delete_records(log, log.high_watermark + 1)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert delete_records(log, -1) == log.high_watermark  # -1: up to the HW


def test_delete_records_on_compacted_only_log_is_a_policy_violation(env: Env) -> None:
    log = env.log(config=LogConfig(cleanup_policy=("compact",)))
    produce(log, "a", "1")
    with pytest.raises(KafkaError) as exc:
        delete_records(log, 1)
    assert exc.value.code == ErrorCode.POLICY_VIOLATION
    assert log.log_start_offset == 0


def open_files_under(path: Path) -> list[str]:
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc to list open files")
def test_shutdown_closes_segments_still_waiting_for_their_delete_delay(tmp_path: Path) -> None:
    # A clean shutdown before file.delete.delay.ms has passed used to leave the `.deleted` segments' files open
    # (in-process brokers of a test session ran out of descriptors); now they are unlinked and closed.
    e = Env(tmp_path / "data", ManualClock())
    log = e.log(config=DELETE)
    fill(log, 4, per_segment=1)
    e.clock.advance(20_000)
    assert delete_old_segments(log, e.clock.milliseconds()) == 4
    assert any(name.endswith(".deleted") for name in open_files_under(tmp_path))
    e.close()
    assert open_files_under(tmp_path) == []
    assert not list((tmp_path / "data").rglob("*.deleted"))
