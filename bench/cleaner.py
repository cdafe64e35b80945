"""Log cleaner benchmark. Prints figures only; there is no pass/fail.

1. Cleaner throughput (MB/s of log read: offset-map build + cleaning pass) on a large compacted log of
   1 KiB records and one of 100 B records, each with 25% distinct keys, built directly on disk.
2. Produce latency (p50/p99, acks=all, one record per request) and event-loop lag against an in-process
   broker while idle, and while its cleaner thread compacts a large log with cleaner.pacing off, then on.

    python bench/cleaner.py [--mb MEGABYTES] [--max-seconds S]

Bounded to roughly a minute in total with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner  # noqa: E402
from tidelog.clock import Clock  # noqa: E402
from tidelog.config.log_config import LogConfig  # noqa: E402
from tidelog.protocol.records import Record, build_batch  # noqa: E402
from tidelog.storage import TopicPartition  # noqa: E402
from tidelog.storage.log_manager import LogManager  # noqa: E402

RECORDS_PER_BATCH = 50
COMPACT = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, segment_bytes=8 * 1024 * 1024)


def fill(log, total_bytes: int, value_size: int, key_space_fraction: float = 0.25,  # noqa: ANN001
         append=None) -> int:  # noqa: ANN001
    count = max(RECORDS_PER_BATCH, total_bytes // (value_size + 20))
    keys = max(1, int(count * key_space_fraction))
    value = b"x" * value_size
    now = int(time.time() * 1000)
    written = 0
    for start in range(0, count, RECORDS_PER_BATCH):
        recs = [Record(i, now, f"key-{(start + i) * 7919 % keys}".encode(), value) for i in range(RECORDS_PER_BATCH)]
        batch = build_batch(recs, 0)
        (append or log.append_as_leader)(batch)
        written += RECORDS_PER_BATCH
    return written


def throughput(record_size: int, megabytes: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-bench-cleaner-"))
    try:
        manager = LogManager([str(tmp)], LogConfig(), Clock())
        manager.startup()
        log = manager.get_or_create_log(TopicPartition("bench", 0), COMPACT, bytes(range(1, 17)))
        count = fill(log, int(megabytes * 1024 * 1024), record_size)
        log.roll()
        size = log.size_in_bytes()
        cleaner = LogCleaner(CleanerConfig(), [str(tmp)], manager.all_logs, Clock())
        start = time.perf_counter()
        assert cleaner.clean_once()
        elapsed = time.perf_counter() - start
        after = log.size_in_bytes()
        mb = size / 1e6
        print(f"{record_size:>5} B records: {count:>9,} records, {mb:7.1f} MB cleaned in {elapsed:6.2f} s = "
              f"{mb / elapsed:6.2f} MB/s ({count / elapsed:,.0f} records/s); size {mb:.1f} -> {after / 1e6:.1f} MB")
        manager.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def produce_latencies(bootstrap: str, topic: str, seconds: float, stop=None) -> list[float]:  # noqa: ANN001
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    out = []
    try:
        producer.send(topic, key=b"warm", value=b"up", partition=0).get(timeout=60)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (stop and stop()):
            t0 = time.perf_counter()
            producer.send(topic, key=b"k", value=b"v" * 100, partition=0).get(timeout=60)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        producer.close()
    return out


def describe(label: str, lat: list[float], unit: str = "sends") -> None:
    if len(lat) < 2:
        print(f"{label:>32}: not enough samples")
        return
    q = statistics.quantiles(lat, n=100, method="inclusive")
    print(f"{label:>32}: {len(lat):>6} {unit}, p50 {q[49]:6.2f} ms, p99 {q[98]:6.2f} ms, max {max(lat):6.2f} ms")


class LoopLag:
    """How late 1 ms timers fire on the broker's event loop: the GIL wait the cleaner adds to every wake-up."""

    def __init__(self, loop) -> None:  # noqa: ANN001
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._future = asyncio.run_coroutine_threadsafe(self._probe(), loop)

    async def _probe(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()  # not loop.time(): uvloop caches it per iteration
            await asyncio.sleep(0.001)
            self.samples.append((time.perf_counter() - t0) * 1000 - 1.0)

    def stop(self) -> list[float]:
        self._stop.set()
        self._future.result(timeout=60)
        return self.samples


def measure(label: str, broker, seconds: float, stop=None) -> None:  # noqa: ANN001
    lag = LoopLag(broker.loop)
    lat = produce_latencies(broker.bootstrap, "latency", seconds, stop)
    describe(label, lat)
    describe(label + " (loop lag)", lag.stop(), unit="timers")


def latency_while_cleaning(megabytes: float, seconds: float) -> None:
    """Idle, then while the cleaner compacts one large log with cleaner.pacing off, then another (the same
    size) with pacing on: the two cleaning phases run in the same broker, back to back."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from tidelog.cleaner import pacing
    from tidelog.testing import run_broker

    segment = str(8 * 1024 * 1024)
    with run_broker(overrides={"log.cleaner.backoff.ms": 200}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("latency", 1, 1)] + [
            NewTopic(name, 1, 1, topic_configs={"segment.bytes": segment}) for name in ("big-a", "big-b")])
        admin.close()
        for name in ("big-a", "big-b"):
            big = broker.state.log_manager.get_log(TopicPartition(name, 0))
            fill(big, int(megabytes * 1024 * 1024), 1024,
                 append=lambda b, log=big: broker.call(lambda: log.append_as_leader(b)))
            broker.call(lambda log=big: log.roll())
        measure("idle", broker, seconds)
        for name, paced in (("big-a", False), ("big-b", True)):
            pacing.ENABLED = paced
            before = len(broker.state.cleaner.summaries)
            broker.call(lambda n=name: broker.state.topics.set_overrides(n, {
                "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": segment}))
            measure(f"cleaning, pacing {'on' if paced else 'off'}", broker, seconds * 3,
                    stop=lambda b=before: len(broker.state.cleaner.summaries) > b)
            rate = re.search(r"processed in ([0-9.]+) seconds \(([0-9.]+) MB/sec\)", broker.state.cleaner.summaries[-1])
            if rate:
                print(f"{'':>34}cleaner: {rate.group(2)} MB/s ({rate.group(1)} s)")
        pacing.ENABLED = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=24.0, help="size of each benchmark log in MiB")
    parser.add_argument("--max-seconds", type=float, default=8.0, help="idle latency sampling time")
    args = parser.parse_args()
    print("cleaner throughput (map build + cleaning pass, one thread):")
    throughput(1024, args.mb)
    throughput(100, args.mb / 3)
    print("produce latency (kafka-python, acks=all, 100 B values):")
    latency_while_cleaning(args.mb * 2, args.max_seconds)


if __name__ == "__main__":
    main()
