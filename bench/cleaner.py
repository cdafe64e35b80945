"""Log cleaner benchmark. Prints figures only; there is no pass/fail.

1. Cleaner throughput (map build + cleaning pass) on large compacted logs of 1 KiB and of 100 B records, each with
   25% distinct keys, built directly on disk: one thread on one log, then one thread on two logs one after the other
   and two threads on the two logs at once. Each run is done with the pure-Python core and with the C core
   (protocol/_cleaner_core.c), interleaved in one process; wall time, CPU time, CPU-seconds per GB and records per
   CPU-second.
2. Produce latency (p50/p99, acks=all, one record per request) and event-loop lag against an in-process broker while
   idle, and while its cleaner thread compacts large logs: the pure-Python core with cleaner.pacing on (the old
   behaviour), the pure-Python core with pacing off, and the C core.

    python bench/cleaner.py [--mb MEGABYTES] [--max-seconds S] [--latency-logs N]

Bounded to a few minutes in total with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner  # noqa: E402
from tidelog.cleaner.offset_map import SkimpyOffsetMap  # noqa: E402
from tidelog.clock import Clock  # noqa: E402
from tidelog.config.log_config import LogConfig  # noqa: E402
from tidelog.protocol.records import Record, build_batch  # noqa: E402
from tidelog.storage import TopicPartition  # noqa: E402
from tidelog.storage.log_manager import LogManager  # noqa: E402

RECORDS_PER_BATCH = 50
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPACT = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01, segment_bytes=8 * 1024 * 1024)


def fill(log, total_bytes: int, value_size: int, key_space_fraction: float = 0.25,  # noqa: ANN001
         append=None, codec: int = 0) -> int:  # noqa: ANN001
    count = max(RECORDS_PER_BATCH, total_bytes // (value_size + 20))
    keys = max(1, int(count * key_space_fraction))
    value = b"x" * value_size
    now = int(time.time() * 1000)
    written = 0
    for start in range(0, count, RECORDS_PER_BATCH):
        recs = [Record(i, now, f"key-{(start + i) * 7919 % keys}".encode(), value) for i in range(RECORDS_PER_BATCH)]
        batch = build_batch(recs, 0, compression=codec)
        (append or log.append_as_leader)(batch)
        written += RECORDS_PER_BATCH
    return written


def make_template(record_size: int, megabytes: float, partitions: int, codec: int = 0) -> tuple[Path, int, int]:
    """A log dir with `partitions` filled compacted logs: (dir, records per log, bytes per log)."""
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-bench-cleaner-"))
    manager = LogManager([str(tmp)], LogConfig(), Clock())
    manager.startup()
    count = size = 0
    for partition in range(partitions):
        log = manager.get_or_create_log(TopicPartition("bench", partition), COMPACT, bytes(range(1, 17)))
        count = fill(log, int(megabytes * 1024 * 1024), record_size, codec=codec)
        log.roll()
        size = log.size_in_bytes()
    manager.shutdown()
    return tmp, count, size


def cleaner_core() -> Any:
    """tidelog.cleaner.core, or a stand-in without an accelerator (a checkout from before the C core: the bench then
    measures its Python cleaner, for a before/after run)."""
    try:
        from tidelog.cleaner import core
    except ImportError:
        return types.SimpleNamespace(accelerator=None)
    return core


def gil_free_seconds() -> float:
    accelerator = cleaner_core().accelerator
    return float(accelerator.gil_free_seconds()) if accelerator is not None else 0.0


_MAPS: list[SkimpyOffsetMap] = []  # one per worker, kept across runs as a cleaner thread keeps its map


def timed_clean(template: Path, partitions: int, threads: int) -> tuple[float, float, float, float]:
    """Clean `partitions` logs of a copy of `template` with `threads` cleaner threads: (wall s, CPU s, kernel CPU s,
    CPU s spent in the C core with the GIL released)."""
    from tidelog.cleaner.cleaner import LogCleaningAbortedError  # noqa: F401 - imported before timing

    work = Path(tempfile.mkdtemp(prefix="tidelog-bench-cleaner-run-"))
    try:
        shutil.copytree(template, work, dirs_exist_ok=True)
        manager = LogManager([str(work)], LogConfig(), Clock())
        manager.startup()
        for log in manager.all_logs().values():
            log.update_config(COMPACT)
        cleaner = LogCleaner(CleanerConfig(), [str(work)], manager.all_logs, Clock())
        cleanables = [cleaner.manager.grab_filthiest_compacted_log() for _ in range(partitions)]
        assert all(c is not None for c in cleanables)
        workers = [cleaner.new_cleaner(i) for i in range(threads)]
        for i, worker in enumerate(workers):
            if i == len(_MAPS):
                _MAPS.append(worker.offset_map)
            worker.offset_map = _MAPS[i]

        def run(index: int) -> None:
            for cleanable in cleanables[index::threads]:
                workers[index].clean(cleanable)

        free0, usage0, wall0 = gil_free_seconds(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        if threads == 1:
            run(0)
        else:
            pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
        wall, usage = time.perf_counter() - wall0, resource.getrusage(resource.RUSAGE_SELF)
        free = gil_free_seconds() - free0
        system = usage.ru_stime - usage0.ru_stime
        manager.shutdown()
        return wall, usage.ru_utime - usage0.ru_utime + system, system, free
    finally:
        shutil.rmtree(work, ignore_errors=True)


def throughput(record_size: int, megabytes: float, rounds: int, codec: str = "none") -> None:
    core = cleaner_core()
    accelerator = core.accelerator
    impls = [("python", None)] + ([("C", accelerator)] if accelerator is not None else [])
    template, count, size = make_template(record_size, megabytes, 2, CODECS[codec])
    try:
        print(f"{record_size:>5} B records, {codec}: {count:,} records, {size / 1e6:.1f} MB per log")
        results: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
        for _ in range(rounds):  # interleaved: python, C, python, C, ...
            for name, impl in impls:
                core.accelerator = impl
                for label, partitions, threads in (("1 log, 1 thread", 1, 1), ("2 logs, 1 thread", 2, 1),
                                                   ("2 logs, 2 threads", 2, 2)):
                    results.setdefault((name, label), []).append(timed_clean(template, partitions, threads))
        core.accelerator = accelerator
        for name, _ in impls:
            best = {label: min(runs) for (n, label), runs in results.items() if n == name}
            for label, (wall, cpu, _, _) in best.items():
                logs = 2 if label.startswith("2") else 1
                print(f"  {name:>6} {label:<18} {wall:6.2f} s wall {cpu:6.2f} s CPU: {logs * count / wall:>11,.0f} "
                      f"records/s {logs * size / 1e6 / wall:7.1f} MB/s | {cpu / (logs * size / 1e9):6.2f} CPU-s/GB "
                      f"{logs * count / max(cpu, 1e-9):>11,.0f} records/CPU-s")
            one, two = best["2 logs, 1 thread"][0], best["2 logs, 2 threads"][0]
            _, cpu, system, free = best["2 logs, 1 thread"]
            # the kernel's share (reads, writes, fsync, page faults) runs without the GIL too; page faults taken in
            # the C core count in both, so the Python share is a lower bound
            python = max(0.0, 1 - (free + system) / cpu) if cpu else 1.0
            print(f"  {name:>6} two threads vs one on two logs: {one / two:.2f}x faster | CPU: C core "
                  f"{100 * free / cpu:.0f}%, kernel {100 * system / cpu:.0f}%, Python (GIL held) {100 * python:.0f}% "
                  f"-> two threads on two free cores: up to {1 / (python + (1 - python) / 2):.2f}x")
    finally:
        shutil.rmtree(template, ignore_errors=True)


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


def latency_while_cleaning(megabytes: float, seconds: float, logs_per_phase: int) -> None:
    """Idle, then while the cleaner compacts `logs_per_phase` large logs one after another: with the pure-Python core
    and cleaner.pacing on (the behaviour before the C core), then off, then with the C core. Each phase has its own
    logs, all in the same broker, back to back."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from tidelog.cleaner import pacing
    from tidelog.testing import run_broker

    core = cleaner_core()
    accelerator = core.accelerator
    phases = [("python core, pacing on", None, True), ("python core, pacing off", None, False)]
    if accelerator is not None:
        phases.append(("C core", accelerator, True))
    segment = str(8 * 1024 * 1024)
    with run_broker(overrides={"log.cleaner.backoff.ms": 200}) as broker:
        names = [[f"big-{p}-{i}" for i in range(logs_per_phase)] for p in range(len(phases))]
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("latency", 1, 1)] + [
            NewTopic(name, 1, 1, topic_configs={"segment.bytes": segment}) for group in names for name in group])
        admin.close()
        for group in names:
            for name in group:
                big = broker.state.log_manager.get_log(TopicPartition(name, 0))
                fill(big, int(megabytes * 1024 * 1024), 1024,
                     append=lambda b, log=big: broker.call(lambda: log.append_as_leader(b)))
                broker.call(lambda log=big: log.roll())
        measure("idle", broker, seconds)
        for (label, impl, paced), group in zip(phases, names, strict=True):
            core.accelerator = impl
            pacing.ENABLED = paced
            before = len(broker.state.cleaner.summaries)
            start = time.perf_counter()
            for name in group:
                broker.call(lambda n=name: broker.state.topics.set_overrides(n, {
                    "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": segment}))
            wanted = before + len(group)
            measure(f"cleaning, {label}", broker, seconds * 6,
                    stop=lambda n=wanted: len(broker.state.cleaner.summaries) >= n)
            elapsed = time.perf_counter() - start
            rates = [float(m.group(1)) for line in broker.state.cleaner.summaries[before:]
                     if (m := re.search(r"\(([0-9.]+) MB/sec\)", line))]
            print(f"{'':>34}cleaner: {len(rates)} logs in {elapsed:.1f} s, "
                  f"{', '.join(f'{r:.0f}' for r in rates)} MB/s each")
        core.accelerator = accelerator
        pacing.ENABLED = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=48.0, help="size of each benchmark log in MiB")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of the throughput runs (best kept)")
    parser.add_argument("--max-seconds", type=float, default=8.0, help="idle latency sampling time")
    parser.add_argument("--latency-logs", type=int, default=3, help="logs cleaned in each latency phase")
    parser.add_argument("--codecs", default="none", help="comma-separated batch codecs of the throughput logs "
                        "(none, gzip, snappy, lz4, zstd; the log sizes are before compression)")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (figures are shared-machine figures)")
    print("cleaner throughput (map build + cleaning pass; best of the interleaved rounds):")
    for codec in args.codecs.split(","):
        throughput(1024, args.mb, args.rounds, codec)
        throughput(100, args.mb / 2, args.rounds, codec)
    if not args.skip_latency:
        print("produce latency (kafka-python, acks=all, 100 B values):")
        latency_while_cleaning(args.mb, args.max_seconds, args.latency_logs)


if __name__ == "__main__":
    main()
