"""Fetch read path: consume throughput (kcat) from an in-process broker (records sent with sendfile from the
segment files, never mmapped), the pread storage read alone (Log.read + the bytes into a frame, no network: the
path TLS listeners and non-Fetch readers take), and the process RSS before and after (page-cache pages are not
the broker's). Prints figures only; no pass/fail.

    python bench/fetch.py [--mb MEGABYTES] [--value-size BYTES] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.protocol.records import Record, build_batch  # noqa: E402
from tidelog.storage import TopicPartition as TP  # noqa: E402
from tidelog.testing import run_broker  # noqa: E402

TOPIC = "fetch-bench"
SEGMENT_BYTES = 16 * 1024 * 1024  # several segments: consumers read rolled segments and the active one


def fill(broker, megabytes: float, value_size: int) -> tuple[int, int]:  # noqa: ANN001
    log = broker.state.log_manager.get_log(TP(TOPIC, 0))
    value = os.urandom(value_size // 2).hex().encode()[:value_size]
    per_batch = max(1, 256 * 1024 // value_size)
    now = int(time.time() * 1000)
    count = int(megabytes * 1024 * 1024) // value_size
    for start in range(0, count, per_batch):
        batch = build_batch([Record(i, now, str(start + i).encode(), value) for i in range(per_batch)], 0)
        broker.call(lambda b=batch: log.append_as_leader(b))
    return broker.call(lambda: log.log_end_offset), broker.call(lambda: log.size_in_bytes())


def consume_all(bootstrap: str, size: int, max_seconds: float) -> float:
    """MB/s of kcat (librdkafka, its own process: no GIL shared with the broker) reading the partition from
    the start to its end, connection set-up included."""
    cmd = ["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o\\n",
           "-X", "fetch.max.bytes=67108864", "-X", "max.partition.fetch.bytes=8388608",
           "-X", "queued.max.messages.kbytes=262144"]
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, timeout=max_seconds)
    return size / 1e6 / (time.perf_counter() - start)


def storage_read_all(broker, count: int) -> float:  # noqa: ANN001
    """Log.read over the whole log in 8 MiB fetches, each copied once into a frame like the encoder does."""
    log = broker.state.log_manager.get_log(TP(TOPIC, 0))

    def run() -> float:
        frame = bytearray(9 * 1024 * 1024)
        start = time.perf_counter()
        offset = 0
        while offset < count:
            data = log.read(offset, 8 * 1024 * 1024, count, True)
            frame[: len(data)] = data
            offset = _next_offset(data)
        return time.perf_counter() - start

    return broker.call(run, timeout=600)


def _next_offset(data: memoryview | bytes) -> int:
    from tidelog.protocol.record_batch import iter_batches

    last = None
    for _, header in iter_batches(data):
        last = header
    assert last is not None
    return last.next_offset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=128.0, help="log size in MiB")
    parser.add_argument("--value-size", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3, help="consume passes")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="time cap per consume pass")
    args = parser.parse_args()
    with run_broker(overrides={"log.segment.bytes": SEGMENT_BYTES}) as broker:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        admin.close()
        count, size = fill(broker, args.mb, args.value_size)
        mb = size / 1e6
        print(f"{count:,} records x {args.value_size} B, {mb:.1f} MB in "
              f"{len(broker.state.log_manager.get_log(TP(TOPIC, 0)).segments)} segments")
        rss_before = rss_mib()
        consume: list[float] = []
        storage: list[float] = []
        for _ in range(args.rounds):
            consume.append(consume_all(broker.bootstrap, size, args.max_seconds))
            storage.append(mb / storage_read_all(broker, count))
        print(f"{'consume (kcat)':>26}: {statistics.median(consume):8.1f} MB/s (median of {args.rounds})")
        print(f"{'Log.read + frame copy':>26}: {statistics.median(storage):8.1f} MB/s (median of {args.rounds})")
        print(f"{'broker process RSS':>26}: {rss_before:.0f} MiB before the reads, {rss_mib():.0f} MiB after")


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")

if __name__ == "__main__":
    main()
