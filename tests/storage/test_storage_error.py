"""A failing write becomes KAFKA_STORAGE_ERROR and leaves no partial batch visible or on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from storage_testlib import batch_offsets, client_batch, open_log

from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.record_batch import crc_is_valid, iter_batches

ROOT = Path(__file__).resolve().parents[2]


def test_write_failure_with_read_only_fd(tmp_path: Path, clock: ManualClock) -> None:
    lg = open_log(tmp_path, clock)
    lg.append_as_leader(client_batch(2))
    seg = lg.active_segment
    size = seg.size
    # Swap a read-only descriptor in under the segment's fd number: pwrite then really fails (EBADF).
    ro = os.open(seg.log_path, os.O_RDONLY)
    saved = os.dup(seg._fd)
    os.dup2(ro, seg._fd)
    try:
        try:
            lg.append_as_leader(client_batch(3))
        except KafkaError as e:
            assert e.code == ErrorCode.KAFKA_STORAGE_ERROR
        else:
            raise AssertionError("append should have failed")
        assert lg.log_end_offset == 2 and seg.size == size
        assert lg.read(0, 10**6, lg.high_watermark, True) == lg.read(0, 10**6, 2, True)
        assert batch_offsets(lg.read(0, 10**6, lg.high_watermark, True)) == [(0, 1)]
    finally:
        os.dup2(saved, seg._fd)
        os.close(saved)
        os.close(ro)
    # The log keeps working once the disk does, and the failed append consumed no offset.
    assert lg.append_as_leader(client_batch(1)).first_offset == 2
    assert batch_offsets(lg.read(0, 10**6, lg.high_watermark, True)) == [(0, 1), (2, 2)]


CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    sys.path.insert(0, sys.argv[2])
    sys.path.insert(0, os.path.join(sys.argv[2], "tests", "storage"))
    from pathlib import Path
    from tidelog.config.log_config import LogConfig
    from tidelog.protocol.errors import KafkaError
    from storage_testlib import client_batch, open_log
    from tidelog.clock import ManualClock

    lg = open_log(Path(sys.argv[1]), ManualClock(), LogConfig(segment_index_bytes=4096))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # get EFBIG from write() instead of a signal
    limit = 5000
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    ok, error = 0, None
    for i in range(100):
        try:
            lg.append_as_leader(client_batch(1, value=b"x" * 300))
            ok += 1
        except KafkaError as e:
            error = int(e.code)
            break
    print(json.dumps({"ok": ok, "error": error, "leo": lg.log_end_offset, "size": lg.active_segment.size,
                      "file": os.path.getsize(lg.active_segment.log_path)}))
    """
)


def test_write_failure_past_file_size_limit(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the batch that crosses the limit a short write followed by EFBIG."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, str(script), str(data), str(ROOT)], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    batch = len(client_batch(1, value=b"x" * 300))
    assert result["error"] == ErrorCode.KAFKA_STORAGE_ERROR
    assert result["ok"] == 5000 // batch
    assert result["leo"] == result["ok"]
    # The partial batch was cut off again: the file holds exactly the successful batches.
    assert result["size"] == result["file"] == result["ok"] * batch
    raw = (data / "orders-0" / "00000000000000000000.log").read_bytes()
    batches = list(iter_batches(raw))
    assert len(batches) == result["ok"] and all(crc_is_valid(raw, p, h) for p, h in batches)
    # And the log reopens with exactly those batches.
    lg = open_log(data, ManualClock(), LogConfig(segment_index_bytes=4096), had_clean_shutdown=False)
    assert lg.log_end_offset == result["ok"]
