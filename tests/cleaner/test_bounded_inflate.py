"""A compressed batch that inflates far beyond the cleaner's inflate window (record_stream.WINDOW, 1 MiB) is cleaned
from a bounded stream by both cores: the pass keeps the latest record of each key, and the memory it holds stays a
few windows, not the ~58 MiB the batch inflates to (before, both cores inflated a batch whole, the C core then
copying it once more).

tracemalloc sees both cores' allocations (the C core allocates through PyMem_RawMalloc, the inflaters hand it
Python bytes); the C core's resident set is also measured from outside, in a subprocess. One raw snappy block is
the exception: nothing streams it (see record_stream.py), so it is checked for its result only."""

from __future__ import annotations

import functools
import gc
import json
import os
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from cleaner_env import Env, read_all

from tests.accelerators import require_built
from tidelog.cleaner import core
from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
from tidelog.protocol import codec_libs
from tidelog.protocol.record_batch import CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, compute_crc
from tidelog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, build_batch

RECORDS = 1_200
VALUE_SIZE = 50_000  # 1,200 records of ~50 KB: the batch inflates to ~57 MiB, under the produce path's 64 MiB limit
KEYS = 40
MiB = 1024 * 1024
# Generous: measured 6-10 MiB, and 22 MiB for the C core on xerial snappy, whose ~2.7 MB compressed batch is held
# several times over (the chunk, the inflater's copy, the filter's per-chunk buffers). Inflating batches whole, the
# cores held 59-176 MiB for this pass (gzip and zstd, both cores).
PEAK_BOUND = 32 * MiB
BIG = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, max_message_bytes=16 * MiB)
CODECS = {"gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD, "snappy-raw": SNAPPY}


@functools.cache
def big_batch(codec: str) -> bytes:
    """One batch of RECORDS highly compressible records over KEYS keys; each value starts with its index."""
    zeros = bytes(VALUE_SIZE - 4)
    records = [Record(i, 1000, b"k%03d" % (i % KEYS), struct.pack(">I", i) + zeros) for i in range(RECORDS)]
    if codec != "snappy-raw":
        return bytes(build_batch(records, 0, compression=CODECS[codec]))
    # One raw snappy block (what librdkafka writes), not snappy-java's xerial framing.
    plain = build_batch(records, 0, compression=NONE)
    batch = bytearray(plain[:HEADER_SIZE]) + bytes(codec_libs.snappy().compress_raw(bytes(plain[HEADER_SIZE:])))
    struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
    struct.pack_into(">h", batch, 21, struct.unpack_from(">h", batch, 21)[0] | SNAPPY)
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def write_log(path: Path, codec: str) -> None:
    env = Env(path, ManualClock())
    try:
        log = env.log(config=BIG)
        log.append_as_leader(big_batch(codec))
        log.roll()
        log.append_as_leader(build_batch([Record(0, 2000, b"tail", b"x")], 0))
    finally:
        env.close()


def expected() -> list[tuple[bytes | None, bytes]]:
    latest = [(b"k%03d" % (i % KEYS), struct.pack(">I", i)) for i in range(RECORDS - KEYS, RECORDS)]
    return [*latest, (b"tail", b"x")]


def check_cleaned(env: Env) -> None:
    records = read_all(env.log(config=BIG))
    assert [(r.key, (r.value or b"")[:4]) for r in records] == expected()


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("impl", ["c", "python"])
def test_a_batch_inflating_far_beyond_the_window_is_cleaned_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impl: str, codec: str
) -> None:
    if impl == "python":
        monkeypatch.setattr(core, "accelerator", None)
    else:
        require_built(core.accelerator is not None, "the C cleaner core")
    write_log(tmp_path, codec)
    env = Env(tmp_path, ManualClock())
    try:
        env.log(config=BIG)  # compacted (a reopened log takes the broker's default config)
        gc.collect()
        tracemalloc.start()
        try:
            assert env.cleaner.clean_once()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        check_cleaned(env)
    finally:
        env.close()
    if codec != "snappy-raw":  # one raw block inflates whole: nothing streams it
        assert peak < PEAK_BOUND, f"{codec}: the pass held {peak / MiB:.1f} MiB for a batch of {RECORDS} records"


_MEASURE = """
import json, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from cleaner_env import Env
from tidelog.cleaner import core
from tidelog.clock import ManualClock
from tidelog.config.log_config import LogConfig
env = Env(Path(sys.argv[1]), ManualClock())
env.log(config=LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, max_message_bytes=16 << 20))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cleaned = env.cleaner.clean_once()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
env.close()
print(json.dumps({"c_core": core.accelerator is not None, "cleaned": cleaned, "grew_kib": after - before}))
"""


def test_the_c_core_resident_set_stays_bounded(tmp_path: Path) -> None:
    """The same pass on the C core in a fresh process: its peak resident set grows by far less than the batch
    inflates to."""
    require_built(core.accelerator is not None, "the C cleaner core")
    write_log(tmp_path, "zstd")
    env = {k: v for k, v in os.environ.items() if k != "TIDELOG_PURE_PYTHON"}
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(tmp_path), str(Path(__file__).parent)],
                         capture_output=True, text=True, check=True, env=env, timeout=300)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["c_core"] and found["cleaned"]
    assert found["grew_kib"] * 1024 < PEAK_BOUND, f"resident set grew by {found['grew_kib'] / 1024:.1f} MiB"
    check = Env(tmp_path, ManualClock())
    try:
        check_cleaned(check)
    finally:
        check.close()
