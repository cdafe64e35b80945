"""read_committed Fetch over many small segments: the aborted-transaction lookup that every read_committed fetch
does (Log.collect_aborted_transactions, Kafka's LocalLog.collectAbortedTransactions), timed alone and through the
wire. The log holds --segments small segments of plain batches with an aborted transaction every
--abort-every segments, each one spanning a segment roll (its ABORT marker in the next segment). Prints figures
only; no pass/fail.

    python bench/read_committed.py [--segments N] [--abort-every K] [--fetches N]

Fetches start at random offsets (a fixed seed), half with a 4 KiB partition limit and half with 1 MiB; the
figures are fetches per second and CPU microseconds per fetch of this process (broker and the one raw client).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.protocol.api_keys import ApiKey  # noqa: E402
from tidelog.protocol.messages import request_class  # noqa: E402
from tidelog.protocol.records import Record, build_batch  # noqa: E402
from tidelog.storage import TopicPartition as TP  # noqa: E402
from tidelog.testing import KafkaWire, run_broker  # noqa: E402

TOPIC = "rc-bench"
FETCH = int(ApiKey.FETCH)
SEGMENT_BYTES = 16 * 1024


def fill(broker, segments: int, abort_every: int) -> tuple[int, int]:  # noqa: ANN001
    """Plain batches of 20 records x 50 B; every `abort_every` segments a transaction starts before the roll
    and is aborted after it. Returns (log end offset, aborted transactions)."""
    log = broker.state.log_manager.get_log(TP(TOPIC, 0))
    now = int(time.time() * 1000)
    value = b"v" * 50
    aborted = 0
    pid = 1000

    def plain(n: int) -> bytes:
        return bytes(build_batch([Record(i, now, b"k%d" % i, value) for i in range(n)], 0))

    def txn(producer_id: int, seq: int) -> bytes:
        return bytes(build_batch([Record(0, now, b"t", value)], 0, producer_id=producer_id, producer_epoch=0,
                                 base_sequence=seq, is_transactional=True))

    def one_segment(index: int) -> None:
        nonlocal aborted, pid
        spanning = index % abort_every == 0
        if spanning:
            log.append_as_leader(txn(pid, 0))
        while log.segments.last_segment.size < SEGMENT_BYTES - 1500:
            log.append_as_leader(plain(20))
        log.roll()
        if spanning:
            log.append_as_leader(txn(pid, 1))
            log.append_control_marker(pid, 0, 0, False)
            aborted += 1
            pid += 1

    for i in range(segments):
        broker.call(lambda i=i: one_segment(i))
    return broker.call(lambda: log.log_end_offset), aborted


def fetch_request(offset: int, max_bytes: int):  # noqa: ANN201
    cls = request_class(FETCH)[12]
    part = cls.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                         last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)
    return cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=1, session_id=0,
               session_epoch=-1, topics=[cls.FetchTopic(topic=TOPIC, partitions=[part])], forgotten_topics_data=[],
               rack_id="")


def time_wire(client: KafkaWire, offsets: list[int]) -> tuple[float, float, int]:
    wall, cpu, listed = time.perf_counter(), time.process_time(), 0
    for i, offset in enumerate(offsets):
        response = client.request(FETCH, 12, fetch_request(offset, 4096 if i % 2 else 1 << 20))
        listed += len(response.responses[0].partitions[0].aborted_transactions or [])
    return time.perf_counter() - wall, time.process_time() - cpu, listed


def time_lookup(broker, offsets: list[int]) -> tuple[float, float, int]:  # noqa: ANN001
    log = broker.state.log_manager.get_log(TP(TOPIC, 0))

    def run() -> tuple[float, float, int]:
        wall, cpu, listed = time.perf_counter(), time.process_time(), 0
        for offset in offsets:
            listed += len(log.collect_aborted_transactions(offset, offset + 300))
        return time.perf_counter() - wall, time.process_time() - cpu, listed

    return broker.call(run, timeout=600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=2000)
    parser.add_argument("--abort-every", type=int, default=50, help="segments between spanning aborted txns")
    parser.add_argument("--fetches", type=int, default=2000)
    args = parser.parse_args()
    with run_broker(overrides={"log.segment.bytes": SEGMENT_BYTES}) as broker:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"segment.bytes": str(SEGMENT_BYTES)})])
        admin.close()
        end, aborted = fill(broker, args.segments, args.abort_every)
        segments = len(broker.state.log_manager.get_log(TP(TOPIC, 0)).segments)
        print(f"{end:,} offsets in {segments} segments of {SEGMENT_BYTES // 1024} KiB, {aborted} aborted "
              f"transactions each spanning a roll")
        rng = random.Random(7)
        offsets = [rng.randrange(end) for _ in range(args.fetches)]
        with KafkaWire(broker.bootstrap) as client:
            time_wire(client, offsets[:50])  # warm-up
            wall, cpu, listed = time_wire(client, offsets)
        print(f"{'read_committed Fetch':>28}: {len(offsets) / wall:9.0f} fetches/s, "
              f"{cpu / len(offsets) * 1e6:7.0f} CPU us/fetch, {listed} aborted txns listed")
        wall, cpu, listed = time_lookup(broker, offsets)
        print(f"{'collect_aborted_transactions':>28}: {len(offsets) / wall:9.0f} lookups/s, "
              f"{cpu / len(offsets) * 1e6:7.0f} CPU us/lookup, {listed} listed")


if __name__ == "__main__":
    main()
