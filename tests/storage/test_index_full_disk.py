"""Index entries are stored through the mapping (storage/abstract_index.py): on a full disk the block reservation
ahead of them fails with ENOSPC (the append answers KAFKA_STORAGE_ERROR) and no store ever reaches a sparse page,
which would kill the broker with SIGBUS. A real filesystem: a small tmpfs, filled; needs root to mount it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_testlib import small_tmpfs

CHILD = r"""
import errno, os, sys
from pathlib import Path
from tidelog.storage.offset_index import OffsetIndex
from tidelog.storage.time_index import TimeIndex

root = Path(sys.argv[1])
offsets = OffsetIndex(root / "00000000000000000000.index", 0, 10 * 1024 * 1024)  # sparse, larger than the disk
times = TimeIndex(root / "00000000000000000000.timeindex", 0, 10 * 1024 * 1024)
offsets.append(0, 0)
times.maybe_append(1, 0)
filler = os.open(root / "filler", os.O_WRONLY | os.O_CREAT)  # the rest of the disk
try:
    while True:
        os.write(filler, b"x" * 4096)
except OSError as e:
    assert e.errno == errno.ENOSPC
os.close(filler)
failures = 0
for n in range(1, 200_000):  # far past the blocks reserved so far
    try:
        offsets.append(n, n * 100)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        failures += 1
        break
for n in range(2, 200_000):
    try:
        times.maybe_append(n, n)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
        failures += 1
        break
assert failures == 2, failures
print("entries", offsets.entries, times.entries, "last", offsets.entry(offsets.entries - 1), flush=True)
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path, "256k") as mount:
        yield mount


def test_a_full_disk_fails_index_appends_with_enospc_not_sigbus(small_disk: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run([sys.executable, "-c", CHILD, str(small_disk)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # -7 would be SIGBUS
    words = done.stdout.split()
    offset_entries, time_entries = int(words[1]), int(words[2])
    # Every entry appended before the failure is there and readable; the one that failed is not.
    assert offset_entries > 1 and time_entries > 1
    assert done.stdout.strip().endswith(f"({offset_entries - 1}, {(offset_entries - 1) * 100})")
