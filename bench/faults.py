"""What the fault injector costs a broker that is not using it: sequential Produce and Fetch round trips over
one raw connection with the injector absent (`Server.faults = None`, production), present but idle (every test
broker), and armed for another API (latency on Heartbeat: each Produce/Fetch goes through
`FaultInjector.dispatch`). Prints figures only; there is no pass/fail.

    python bench/faults.py [--requests N] [--rounds R]

Rounds alternate the three modes on the same broker so machine noise spreads evenly; the median is shown, and
the idle check alone is timed for scale (round trips are ~10^5 ns).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import timeit
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tidelog.broker.faults import FaultInjector  # noqa: E402 - runnable from a checkout without installing
from tidelog.protocol.messages import request_class  # noqa: E402
from tidelog.protocol.records import Record, build_batch  # noqa: E402
from tidelog.testing import BrokerHandle, KafkaWire, run_broker  # noqa: E402

PRODUCE, FETCH = 0, 1


def produce_request() -> object:
    batch = bytes(build_batch([Record(0, 1_700_000_000_000, b"k", b"v" * 100)], 0))
    cls = request_class(PRODUCE)[9]
    T = cls.TopicProduceData
    return cls(transactional_id=None, acks=1, timeout_ms=30_000,
               topic_data=[T(name="bench", partition_data=[T.PartitionProduceData(index=0, records=batch)])])


def fetch_request() -> object:
    cls = request_class(FETCH)[12]
    T = cls.FetchTopic
    return cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
               session_epoch=-1, topics=[T(topic="bench", partitions=[T.FetchPartition(
                   partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                   partition_max_bytes=1 << 16)])], forgotten_topics_data=[], rack_id="")


def timed(wire: KafkaWire, api: int, version: int, request: object, n: int) -> float:
    """Microseconds per round trip."""
    start = time.perf_counter()
    for _ in range(n):
        wire.request(api, version, request)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400, help="round trips per API per round")
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()

    injector = FaultInjector()

    def absent(b: BrokerHandle) -> None:
        b.server.faults = None

    def idle(b: BrokerHandle) -> None:
        b.server.faults = injector
        injector.clear()

    def armed_other_api(b: BrokerHandle) -> None:
        b.server.faults = injector
        injector.set_latency(1, "Heartbeat")

    modes: dict[str, Callable[[BrokerHandle], None]] = {
        "absent": absent, "idle": idle, "armed-other-api": armed_other_api}
    results: dict[tuple[str, str], list[float]] = {}
    with run_broker(topics={"bench": 1}, faults=injector) as broker, KafkaWire(broker.bootstrap) as wire:
        produce, fetch = produce_request(), fetch_request()
        timed(wire, PRODUCE, 9, produce, 200)  # warm-up: imports, first segment, caches
        timed(wire, FETCH, 12, fetch, 200)
        for _ in range(args.rounds):
            for mode, apply in modes.items():
                apply(broker)
                results.setdefault(("Produce", mode), []).append(timed(wire, PRODUCE, 9, produce, args.requests))
                results.setdefault(("Fetch", mode), []).append(timed(wire, FETCH, 12, fetch, args.requests))
    print(f"fault injector overhead: {args.requests:,} sequential requests x {args.rounds} rounds, median us/request")
    for api in ("Produce", "Fetch"):
        base = statistics.median(results[(api, "absent")])
        cells = []
        for mode in modes:
            us = statistics.median(results[(api, mode)])
            cells.append(f"{mode} {us:7.1f} us ({(us - base) / base * 100:+5.1f}%)")
        print(f"  {api:>7}: " + ", ".join(cells))
    # The dispatch's whole per-request cost when nothing is injected: this expression, timed alone.
    server = type("S", (), {"faults": FaultInjector()})()
    n = 1_000_000
    ns = timeit.timeit("faults = server.faults\nfaults is None or not faults.armed", globals={"server": server},
                       number=n) / n * 1e9
    print(f"  the idle check itself: {ns:.0f} ns per request")


if __name__ == "__main__":
    main()
