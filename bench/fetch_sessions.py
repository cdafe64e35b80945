"""Fetch cost with 100 partitions, with and without incremental fetch sessions (KIP-227).

A raw-socket client polls an in-process broker at the log end of 100 partitions (max_wait 0, as a consumer
that is caught up), optionally appending one batch to one partition before each poll. Without sessions every
request names all 100 partitions and every response describes all 100; with a session, requests name nothing
(positions only move on the partition that got data) and responses carry only partitions with news.
Prints per-request latency and request/response sizes for both; no pass/fail.

    python bench/fetch_sessions.py [--partitions 100] [--requests 2000] [--with-data]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.protocol.messages import request_class  # noqa: E402
from tidelog.protocol.records import Record, build_batch  # noqa: E402
from tidelog.storage import TopicPartition  # noqa: E402
from tidelog.testing import KafkaWire, run_broker  # noqa: E402

TOPIC = "sessions-bench"
FETCH_VERSION = 12


def fetch_request(positions: dict[int, int] | None, session_id: int, epoch: int) -> Any:
    cls = request_class(1)[FETCH_VERSION]
    T = cls.FetchTopic
    P = T.FetchPartition
    topics = [] if not positions else [T(topic=TOPIC, partitions=[
        P(partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1, log_start_offset=-1,
          partition_max_bytes=1 << 20) for p, o in sorted(positions.items())])]
    return cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0,
               session_id=session_id, session_epoch=epoch, topics=topics, forgotten_topics_data=[], rack_id="")


def run(broker: Any, wire: KafkaWire, partitions: int, requests: int, sessions: bool, with_data: bool
        ) -> tuple[list[float], int, int]:
    logs = [broker.state.topics.log(TopicPartition(TOPIC, p)) for p in range(partitions)]
    positions = {p: broker.call(lambda lg=lg: lg.log_end_offset) for p, lg in enumerate(logs)}
    batch = build_batch([Record(0, int(time.time() * 1000), b"k", b"v" * 100)], 0)
    session_id, epoch = 0, (0 if sessions else -1)
    first = wire.request(1, FETCH_VERSION, fetch_request(positions, 0, epoch))
    if sessions:
        session_id, epoch = first.session_id, 1
        assert session_id != 0, "no session was created"
    latencies: list[float] = []
    sent = received = 0
    changed: dict[int, int] = {}  # positions moved since the last request (an incremental request names them)
    for i in range(requests):
        if with_data:
            p = i % partitions
            broker.call(lambda lg=logs[p]: lg.append_as_leader(batch))
        req = fetch_request(changed if sessions else positions, session_id, epoch)
        frame = wire.frame(1, FETCH_VERSION, req)
        start = time.perf_counter()
        wire.sock.sendall(frame)
        body = wire.read_frame()
        latencies.append(time.perf_counter() - start)
        sent += len(frame)
        received += len(body)
        changed = {}
        if with_data:
            positions[i % partitions] += 1
            changed = {i % partitions: positions[i % partitions]}
        if sessions:
            epoch += 1
    if sessions:
        wire.request(1, FETCH_VERSION, fetch_request({}, session_id, -1))  # close the session
    return latencies, sent // requests, received // requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--with-data", action="store_true", help="append to one partition before each fetch")
    args = parser.parse_args()
    with run_broker() as broker, KafkaWire(broker.bootstrap, timeout=60) as wire:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
        admin.close()
        print(f"{args.partitions} partitions, {args.requests} fetches each, "
              f"{'one partition gets a batch before each fetch' if args.with_data else 'no new data (caught up)'}")
        for label, sessions in (("full fetches (no session)", False), ("incremental session", True)):
            run(broker, wire, args.partitions, 100, sessions, args.with_data)  # warm-up
            lat, req_bytes, resp_bytes = run(broker, wire, args.partitions, args.requests, sessions, args.with_data)
            lat.sort()
            print(f"{label:28s} median {statistics.median(lat) * 1e6:8.0f} us   p99 "
                  f"{lat[int(len(lat) * 0.99)] * 1e6:8.0f} us   request {req_bytes:6d} B   response {resp_bytes:6d} B")


if __name__ == "__main__":
    main()
