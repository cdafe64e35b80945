"""Does compaction keep up with a full-speed producer? Prints figures only; there is no pass/fail.

Issue 29, "Done when" 2. For each core (the C cleaner core, then pure Python via TIDELOG_PURE_PYTHON=1; repeated
--rounds times, interleaved) a fresh `tidelog serve` subprocess hosts one compacted partition with a bounded key
space (--keys keys, --value-size byte values, segment.bytes --segment-mb, min.cleanable.dirty.ratio as Kafka's
default 0.5, log.cleaner.backoff.ms 100). A confluent-kafka producer in its own process writes to it as fast as it
goes (linger.ms 5, 1 MiB batches, no compression) for --seconds; the bench samples every second, during the load and
for --tail seconds after it, the partition's size on disk, its log end offset and, from GET /api/cleaner, its clean
and dirty bytes and dirty ratio.

"log MB" is the partition's segments; "+replaced MB" the segments a cleaning swapped out, still on disk until
file.delete.delay.ms (60 s, Kafka's default) has passed, and a pass's .cleaned/.swap files. The compacted size is the size the partition would have holding one record per key: keys x the size of one
record in a v2 batch (its varint length, attributes, deltas, key, value, header count) — batch headers not counted,
so it is a slight underestimate. "Excess" is (log size - compacted size) / segment.bytes, in segments.
The cleaning rate comes from the broker's own per-cleaning summary lines (Kafka's LogCleaner format): records and
MB read by all passes over their seconds, and the share of the run the cleaner was busy.

    python bench/compaction_keeps_up.py [--seconds 15] [--tail 8] [--keys 10000] [--segment-mb 16] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.testing import BrokerProcess, free_port, wait_for_port  # noqa: E402

TOPIC = "keeps-up"
MB = 1024 * 1024
# Kafka's LogCleaner summary line, one per pass (tidelog/cleaner/stats.py): whole pass, map build included
PROCESSED = re.compile(r"([\d.]+) MB of log processed in ([\d.]+) seconds.*?start size [\d.]+ MB \((\d+) messages\)")


def varint_size(n: int) -> int:
    z = (n << 1) ^ (n >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def record_size(key_len: int, value_len: int, delta: int = 100) -> int:
    """One record in a v2 batch with a typical offset/timestamp delta (storage-format.md, DefaultRecord)."""
    body = 1 + varint_size(delta) + varint_size(delta) + varint_size(key_len) + key_len \
        + varint_size(value_len) + value_len + varint_size(0)
    return varint_size(body) + body


def produce(bootstrap: str, seconds: float, keys: int, value_size: int) -> None:
    """The load: its own process (so it does not share a GIL with the sampler), as fast as librdkafka takes it."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_048_576,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 512 * 1024,
                         "acks": 1, "compression.type": "none"})
    key_list = [b"k%07d" % i for i in range(keys)]
    value = b"v" * value_size
    sent = 0
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        for key in key_list:
            try:
                producer.produce(TOPIC, value, key, 0)
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
    left = producer.flush(60)
    print(json.dumps({"sent": sent, "undelivered": left, "seconds": time.monotonic() - start}), flush=True)


@dataclass
class Sample:
    t: float
    phase: str
    size: int
    pending: int
    leo: int
    clean: int
    dirty: int
    ratio: float
    blocked_by: str


def partition_size(log_dir: str) -> tuple[int, int]:
    """(bytes of the partition's segments, bytes of replaced segments still on disk): a swapped-out segment is
    renamed *.log.deleted and unlinked file.delete.delay.ms later (60 s, Kafka's default); .cleaned/.swap files
    of a pass in progress count with the latter."""
    live = pending = 0
    try:
        with os.scandir(os.path.join(log_dir, f"{TOPIC}-0")) as entries:
            for entry in entries:
                if ".log" not in entry.name:
                    continue
                try:
                    size = entry.stat().st_size
                except FileNotFoundError:
                    continue
                if entry.name.endswith(".log"):
                    live += size
                else:
                    pending += size
    except FileNotFoundError:
        pass
    return live, pending


def api_row(url: str) -> dict[str, Any]:
    rows = json.loads(urllib.request.urlopen(url, timeout=30).read())
    return next((r for r in rows if r["topic"] == TOPIC and r["partition"] == 0), {})


def run_one(label: str, pure: bool, args: argparse.Namespace) -> dict[str, Any]:
    segment_bytes = args.segment_mb * MB
    metrics_port = free_port()
    env = dict(os.environ)
    env.pop("TIDELOG_PURE_PYTHON", None)
    if pure:
        env["TIDELOG_PURE_PYTHON"] = "1"
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-keepsup-") as tmp:
        log_dir = os.path.join(tmp, "data")
        broker = BrokerProcess(log_dir, env=env, fault_control=False, log_file=os.path.join(tmp, "broker.out"),
                               overrides={"metrics.port": metrics_port, "log.cleaner.backoff.ms": 100,
                                          "log.cleaner.threads": 1})
        with broker:
            assert broker.proc is not None
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            futures = admin.create_topics([NewTopic(TOPIC, 1, 1, config={
                "cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                "min.cleanable.dirty.ratio": "0.5"})])
            for f in futures.values():
                f.result(60)
            wait_for_port("127.0.0.1", metrics_port)  # the HTTP endpoint opens after the broker's warm-up
            url = f"http://127.0.0.1:{metrics_port}/api/cleaner"
            producer = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--produce", broker.bootstrap, "--seconds",
                 str(args.seconds), "--keys", str(args.keys), "--value-size", str(args.value_size)],
                stdout=subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "TIDELOG_PURE_PYTHON"})
            start = time.monotonic()
            cpu_before = _proc_cpu(broker.proc.pid)
            samples: list[Sample] = []
            load_end: float | None = None
            tail_end: float | None = None
            tick = start
            while True:
                tick += 1.0
                time.sleep(max(0.0, tick - time.monotonic()))
                now = time.monotonic()
                if load_end is None and producer.poll() is not None:
                    load_end = now
                    tail_end = now + args.tail
                row = api_row(url)
                samples.append(Sample(now - start, "load" if load_end is None else "after",
                                      *partition_size(log_dir), row.get("log_end_offset", 0),
                                      row.get("clean_bytes", 0), row.get("dirty_bytes", 0),
                                      row.get("dirty_ratio", 0.0), row.get("blocked_by", "?")))
                if tail_end is not None and now >= tail_end:
                    break
            out = producer.communicate(timeout=60)[0].decode()
            produced = json.loads(out.strip().splitlines()[-1])
            load_seconds = produced["seconds"]  # first produce() to the end of flush()
            cpu_broker = _proc_cpu(broker.proc.pid) - cpu_before
        log_text = Path(tmp, "broker.out").read_text(errors="replace")
    return {"label": label, "samples": samples, "produced": produced, "load_seconds": load_seconds,
            "cleanings": [tuple(float(x) for x in m.groups()) for m in PROCESSED.finditer(log_text)],
            "cpu_broker": cpu_broker, "segment_bytes": segment_bytes}


def _proc_cpu(pid: int) -> float:
    """utime+stime of a process and its threads, in seconds (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report(result: dict[str, Any], compacted: int, args: argparse.Namespace) -> None:
    seg = result["segment_bytes"]
    samples: list[Sample] = result["samples"]
    print(f"\n== {result['label']} ==")
    print(f"{'t s':>5} {'phase':>5} {'log MB':>8} {'excess seg':>10} {'+replaced MB':>12} {'LEO':>10} {'clean MB':>9} "
          f"{'dirty MB':>9} {'ratio':>6}  blocked_by")
    for s in samples:
        print(f"{s.t:5.1f} {s.phase:>5} {s.size / MB:8.1f} {(s.size - compacted) / seg:10.2f} {s.pending / MB:12.1f} "
              f"{s.leo:10d} "
              f"{s.clean / MB:9.1f} {s.dirty / MB:9.1f} {s.ratio:6.2f}  {s.blocked_by}")
    sent = result["produced"]["sent"]
    records_bytes = sent * record_size(8, args.value_size)
    cleanings = result["cleanings"]
    mb_read = sum(c[0] for c in cleanings)
    secs = sum(c[1] for c in cleanings)
    recs = sum(c[2] for c in cleanings)
    during = [s for s in samples if s.phase == "load"] or samples
    peak = max(samples, key=lambda s: s.size)
    final = samples[-1]
    print(f"ingest: {sent:,} records in {result['load_seconds']:.1f} s = {sent / result['load_seconds']:,.0f} "
          f"records/s, {records_bytes / MB / result['load_seconds']:.1f} MB/s (undelivered "
          f"{result['produced']['undelivered']}; sending stopped at {args.seconds:.0f} s, the rest is flush)")
    print(f"cleaning: {len(cleanings)} passes, {recs:,.0f} records cleaned / {mb_read:.1f} MB processed in {secs:.1f} s busy = "
          f"{recs / max(secs, 1e-9):,.0f} records/s, {mb_read / max(secs, 1e-9):.1f} MB/s while cleaning; "
          f"(whole passes, map build included); busy {100 * secs / samples[-1].t:.0f}% of the run; broker CPU {result['cpu_broker']:.1f} s")
    print(f"size vs compacted ({compacted / MB:.2f} MB): max {peak.size / MB:.1f} MB = +{(peak.size - compacted) / seg:.2f}"
          f" segments at t={peak.t:.0f} s; at the end of the load "
          f"+{(during[-1].size - compacted) / seg:.2f}; final +{(final.size - compacted) / seg:.2f} segments "
          f"({final.size / MB:.1f} MB); max dirty {max(s.dirty for s in samples) / MB:.1f} MB; replaced segments "
          f"awaiting file.delete.delay.ms: max {max(s.pending for s in samples) / MB:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds the producer sends, per core")
    parser.add_argument("--tail", type=float, default=8.0, help="seconds sampled after the load")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="C then pure Python, this many times")
    parser.add_argument("--produce", metavar="BOOTSTRAP", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        produce(args.produce, args.seconds, args.keys, args.value_size)
        return
    compacted = args.keys * record_size(8, args.value_size)
    print(f"{args.keys} keys x {args.value_size} B values, segment.bytes {args.segment_mb} MiB, load "
          f"{args.seconds:.0f} s + {args.tail:.0f} s after; compacted size {compacted / MB:.2f} MB; "
          f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    results = []
    for _ in range(args.rounds):
        for label, pure in (("C cleaner core", False), ("pure Python (TIDELOG_PURE_PYTHON=1)", True)):
            result = run_one(label, pure, args)
            report(result, compacted, args)
            results.append(result)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
