"""Log cleaner benchmark. Prints figures only; there is no pass/fail.

1. Cleaner throughput (map build + cleaning pass) on large compacted logs of 1 KiB and of 100 B records, each with
   25% distinct keys, built directly on disk: one thread on one log, then one thread on two logs one after the other
   and two threads on the two logs at once. Each run is done with the pure-Python core (on logs of --python-mb) and
   with the C core (protocol/_cleaner_core.c, on logs of --mb: long enough, ~1 s a run, for a steady two-thread
   figure), interleaved in one process; wall time, CPU time, CPU-seconds per GB and records per CPU-second. The
   two-thread figure is given per round (its median and range) beside the same figure, in the same rounds, of a
   job that is GIL-free by construction (SHA-256 of 1 MiB buffers): what two threads of this process can get from
   the machine at that moment. On a shared machine that is often far from 2x: Linux's autogroup scheduler gives
   each session an equal CPU share whatever the niceness of the other sessions' processes. A first two-thread
   C-core run is not counted: it touches each worker's offset map once, as a running broker's cleaner threads have
   (its page faults made the first round an outlier). Each copy of a log is synced before it is timed.
2. Produce latency (p50/p99, acks=all, one record per request) and event-loop lag against an in-process broker while
   idle, and while its cleaner thread compacts large logs: the pure-Python core with cleaner.pacing on (its default),
   the pure-Python core with pacing off, and the C core with log.cleaner.thread.nice at its default and at 0. Each
   cleaning phase follows an idle phase of its own (the machine's load changes by the minute) and ends with the
   ratio of the two p99s, plus the loop thread's wait for a CPU (schedstat), which a GIL wait does not count. The
   producer (kafka-python) runs twice per phase: in the broker's process (the old figure: it then competes with
   the event loop and the cleaner for the GIL) and in a child process of its own, as users run producers (the
   issue's 0.49 ms idle figure came from such an outside client). Both are printed.

    python bench/cleaner.py [--mb MEGABYTES] [--python-mb MEGABYTES] [--rounds N] [--max-seconds S]
                            [--latency-logs N] [--latency-rounds N] [--skip-throughput] [--skip-latency]
                            [--skip-python-latency]

Bounded to about ten minutes in total with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
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
        os.sync()  # the copy's writeback must not land in the timed cleaning (it would compete with the fsyncs)
        manager = LogManager([str(work)], LogConfig(), Clock())
        manager.startup()
        for log in manager.all_logs().values():
            log.update_config(COMPACT)
        # the abort check's lookup as the broker wires it (the default copies every log's entry per chunk)
        cleaner = LogCleaner(CleanerConfig(), [str(work)], manager.all_logs, Clock(),
                             has_log=lambda tp: manager.get_log(tp) is not None)
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


def machine_scaling(megabytes: int = 192) -> float:
    """How much faster two threads of this process finish a GIL-free CPU job than one thread, now: hashlib releases
    the GIL while it hashes a buffer above 2 KiB. The ceiling of any two-thread figure taken at the same moment."""
    buf = b"x" * (1 << 20)

    def work(n: int) -> None:
        for _ in range(n):
            hashlib.sha256(buf).digest()

    t0 = time.perf_counter()
    work(megabytes)
    one = time.perf_counter() - t0
    pool = [threading.Thread(target=work, args=(megabytes // 2,)) for _ in range(2)]
    t0 = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return one / (time.perf_counter() - t0)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f}x (range {min(values):.2f}-{max(values):.2f}, {len(values)} rounds)"


def throughput(record_size: int, megabytes: float, python_megabytes: float, rounds: int, codec: str = "none") -> None:
    core = cleaner_core()
    accelerator = core.accelerator
    sizes = {"python": python_megabytes, "C": megabytes}
    impls = [("python", None)] + ([("C", accelerator)] if accelerator is not None else [])
    templates = {name: make_template(record_size, sizes[name], 2, CODECS[codec]) for name, _ in impls}
    try:
        for name, _ in impls:
            _, count, size = templates[name]
            print(f"{record_size:>5} B records, {codec}: {count:,} records, {size / 1e6:.1f} MB per log ({name} core)")
        results: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
        ratios: dict[str, list[float]] = {}
        machine: list[float] = []
        if accelerator is not None:  # not counted: each worker's offset map touched once, as a broker's threads have
            timed_clean(templates["C"][0], 2, 2)
        for _ in range(rounds):  # interleaved: python, C, python, C, ...
            for name, impl in impls:
                core.accelerator = impl
                template = templates[name][0]
                for label, partitions, threads in (("1 log, 1 thread", 1, 1), ("2 logs, 1 thread", 2, 1),
                                                   ("2 logs, 2 threads", 2, 2)):
                    results.setdefault((name, label), []).append(timed_clean(template, partitions, threads))
                one, two = results[(name, "2 logs, 1 thread")][-1][0], results[(name, "2 logs, 2 threads")][-1][0]
                ratios.setdefault(name, []).append(one / two)
            machine.append(machine_scaling())
        core.accelerator = accelerator
        for name, _ in impls:
            _, count, size = templates[name]
            best = {label: min(runs) for (n, label), runs in results.items() if n == name}
            for label, (wall, cpu, _, _) in best.items():
                logs = 2 if label.startswith("2") else 1
                print(f"  {name:>6} {label:<18} {wall:6.2f} s wall {cpu:6.2f} s CPU: {logs * count / wall:>11,.0f} "
                      f"records/s {logs * size / 1e6 / wall:7.1f} MB/s | {cpu / (logs * size / 1e9):6.2f} CPU-s/GB "
                      f"{logs * count / max(cpu, 1e-9):>11,.0f} records/CPU-s")
            one, two = best["2 logs, 1 thread"][0], best["2 logs, 2 threads"][0]
            _, cpu, system, free = best["2 logs, 1 thread"]
            # the kernel's share (reads, writes, fsync, page faults) runs without the GIL too; the C core's own reads
            # and page faults count in both, so the Python share is a lower bound
            python = max(0.0, 1 - (free + system) / cpu) if cpu else 1.0
            print(f"  {name:>6} two threads vs one on two logs: best/best {one / two:.2f}x, per round "
                  f"{spread(ratios[name])} | CPU: C core {100 * free / cpu:.0f}%, kernel {100 * system / cpu:.0f}%, "
                  f"Python (GIL held) {100 * python:.0f}% -> two threads on two free cores: up to "
                  f"{1 / (python + (1 - python) / 2):.2f}x")
        print(f"  a GIL-free job (SHA-256), two threads vs one, in the same rounds: {spread(machine)}; "
              f"load average now {os.getloadavg()[0]:.1f}")
    finally:
        for template, _, _ in templates.values():
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


def producer_child(bootstrap: str, topic: str, seconds: float) -> None:
    """--producer-child: produce_latencies in a process of its own until `seconds` pass or stdin closes; prints the
    latencies as one JSON line."""
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    print(json.dumps(produce_latencies(bootstrap, topic, seconds, closed.is_set)), flush=True)


def produce_latencies_outside(bootstrap: str, topic: str, seconds: float, stop=None) -> list[float]:  # noqa: ANN001
    """produce_latencies, the producer in a child process (the broker's GIL then serves only the broker)."""
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--producer-child", bootstrap, topic,
                              str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        deadline = time.monotonic() + seconds
        while child.poll() is None and time.monotonic() < deadline and not (stop and stop()):
            time.sleep(0.01)
        child.stdin.close()
        return list(json.loads(child.stdout.readline() or "[]"))
    finally:
        child.wait(timeout=60)


def p99(lat: list[float]) -> float:
    return statistics.quantiles(lat, n=100, method="inclusive")[98] if len(lat) >= 2 else float("nan")


def describe(label: str, lat: list[float], unit: str = "sends") -> None:
    if len(lat) < 2:
        print(f"{label:>58}: not enough samples")
        return
    q = statistics.quantiles(lat, n=100, method="inclusive")
    print(f"{label:>58}: {len(lat):>6} {unit}, p50 {q[49]:6.2f} ms, p99 {q[98]:6.2f} ms, max {max(lat):6.2f} ms")


def schedstat(tid: int) -> tuple[int, int, int]:
    """Linux's /proc/<pid>/task/<tid>/schedstat: (ns on a CPU, ns runnable but waiting for a CPU, time slices)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            run, wait, slices = (int(v) for v in f.read().split()[:3])
        return run, wait, slices
    except (OSError, ValueError):
        return 0, 0, 0


class LoopLag:
    """How late 1 ms timers fire on the broker's event loop: the GIL wait the cleaner adds to every wake-up, and the
    wait for a CPU (the loop thread's run-queue time per time slice, from schedstat: not GIL, which it waits for
    asleep)."""

    def __init__(self, loop) -> None:  # noqa: ANN001
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._tid = asyncio.run_coroutine_threadsafe(self._native_id(), loop).result(timeout=60)
        self._sched0 = schedstat(self._tid)
        self._future = asyncio.run_coroutine_threadsafe(self._probe(), loop)

    @staticmethod
    async def _native_id() -> int:
        return threading.get_native_id()

    async def _probe(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()  # not loop.time(): uvloop caches it per iteration
            await asyncio.sleep(0.001)
            self.samples.append((time.perf_counter() - t0) * 1000 - 1.0)

    def stop(self) -> tuple[list[float], float]:
        """(the lag samples, the loop thread's mean run-queue wait per time slice in ms)."""
        self._stop.set()
        self._future.result(timeout=60)
        run0, wait0, slices0 = self._sched0
        run, wait, slices = schedstat(self._tid)
        return self.samples, (wait - wait0) / 1e6 / max(slices - slices0, 1)


def measure(label: str, broker, seconds: float, stop=None, outside: bool = False) -> float:  # noqa: ANN001
    """Print produce latencies and loop lag for `seconds` (or until `stop()`); returns the produce p99."""
    lag = LoopLag(broker.loop)
    produce = produce_latencies_outside if outside else produce_latencies
    lat = produce(broker.bootstrap, "latency", seconds, stop)
    describe(label, lat)
    samples, cpu_wait = lag.stop()
    describe(label + " (loop lag)", samples, unit="timers")
    print(f"{'':>60}loop thread: {cpu_wait:.3f} ms waiting for a CPU per time slice")
    return p99(lat)


def latency_while_cleaning(megabytes: float, seconds: float, logs_per_phase: int, python_phases: bool,
                           rounds: int) -> None:
    """Idle, then while the cleaner compacts `logs_per_phase` large logs one after another: with the pure-Python core
    and cleaner.pacing on, then off, then with the C core at log.cleaner.thread.nice's default and at 0; each with the
    producer in the broker's process and in a child process. Each phase has its own logs, all in the same broker,
    back to back."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from tidelog.cleaner import log_cleaner, pacing
    from tidelog.testing import run_broker

    # a checkout from before log.cleaner.thread.nice: its cleaner threads run at the broker's priority
    niceness = getattr(log_cleaner, "DEFAULT_THREAD_NICE", None)

    core = cleaner_core()
    accelerator = core.accelerator
    phases: list[tuple[str, Any, bool, int | None]] = []
    if python_phases:
        phases += [("python core, pacing on", None, True, niceness),
                   ("python core, pacing off", None, False, niceness)]
    if accelerator is not None:
        phases += [("C core" if niceness is None else f"C core, nice {niceness}", accelerator, True, niceness)]
        if niceness:
            phases += [("C core, nice 0", accelerator, True, 0)]
    runs = [(label + where, impl, paced, nice, outside) for _ in range(rounds) for label, impl, paced, nice in phases
            for outside, where in ((False, ", in-process producer"), (True, ", producer process"))]
    segment = str(8 * 1024 * 1024)
    with run_broker(overrides={"log.cleaner.backoff.ms": 200}) as broker:
        names = [[f"big-{p}-{i}" for i in range(logs_per_phase)] for p in range(len(runs))]
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
        for (label, impl, paced, nice, outside), group in zip(runs, names, strict=True):
            # idle just before each cleaning phase, with the same producer: a same-moment baseline on a machine
            # whose load changes by the minute
            idle = measure(f"idle, before: {label}", broker, seconds, outside=outside)
            core.accelerator = impl
            pacing.ENABLED = paced
            if nice is not None and broker.state.cleaner.config.thread_nice != nice:
                broker.state.cleaner.reconfigure(thread_nice=nice)  # restarts the cleaner threads
            history = broker.state.cleaner.history
            tps = [TopicPartition(name, 0) for name in group]
            start = time.perf_counter()
            for name in group:
                broker.call(lambda n=name: broker.state.topics.set_overrides(n, {
                    "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": segment}))
            busy = measure(f"cleaning, {label}", broker, seconds * 6, outside=outside,
                           stop=lambda tps=tps, history=history: all(history.get(tp) is not None for tp in tps))
            elapsed = time.perf_counter() - start
            done = [last for tp in tps if (last := history.get(tp)) is not None]
            rates = [last.bytes_read / 2**20 / max(last.seconds, 1e-9) for last in done]
            print(f"{'':>60}cleaner: {len(rates)} logs in {elapsed:.1f} s, "
                  f"{', '.join(f'{r:.0f}' for r in rates)} MB/s each; produce p99 cleaning/idle {busy / idle:.2f}x")
        core.accelerator = accelerator
        pacing.ENABLED = True


def main() -> None:
    if sys.argv[1:2] == ["--producer-child"]:
        producer_child(sys.argv[2], sys.argv[3], float(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=192.0, help="size of each C-core benchmark log in MiB (1 KiB "
                        "records; the 100 B logs are half as large); also the size of the latency phase's logs / 4")
    parser.add_argument("--python-mb", type=float, default=48.0, help="size of each pure-Python benchmark log in MiB")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the throughput runs")
    parser.add_argument("--max-seconds", type=float, default=4.0, help="idle latency sampling time before each "
                        "cleaning phase (a phase stops after 6 times as long)")
    parser.add_argument("--latency-logs", type=int, default=8, help="logs cleaned in each latency phase")
    parser.add_argument("--codecs", default="none", help="comma-separated batch codecs of the throughput logs "
                        "(none, gzip, snappy, lz4, zstd; the log sizes are before compression)")
    parser.add_argument("--latency-rounds", type=int, default=1, help="rounds of the latency phases (interleaved)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-python-latency", action="store_true", help="latency phases of the C core only")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (figures are shared-machine figures)")
    if not args.skip_throughput:
        print("cleaner throughput (map build + cleaning pass; best of the interleaved rounds):")
        for codec in args.codecs.split(","):
            throughput(1024, args.mb, args.python_mb, args.rounds, codec)
            throughput(100, args.mb / 2, args.python_mb / 2, args.rounds, codec)
    if not args.skip_latency:
        print("produce latency (kafka-python, acks=all, 100 B values):")
        latency_while_cleaning(args.mb / 4, args.max_seconds, args.latency_logs, not args.skip_python_latency,
                               args.latency_rounds)


if __name__ == "__main__":
    main()
