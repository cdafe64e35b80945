"""GET /api/cleaner cost. Prints figures only; there is no pass/fail.

A broker subprocess hosts one compacted topic of PARTITIONS partitions with a few small segments each. The bench
reports how long one GET /api/cleaner takes, then produce latency (kafka-python, acks=all, one record per request)
while idle and while another thread requests /api/cleaner back to back: the explanation runs on the HTTP server's
thread and must not hold up the event loop.

    python bench/cleaner_explain.py [--partitions 200] [--records 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402

from tidelog.testing import BrokerProcess, free_port  # noqa: E402


def produce_latencies(bootstrap: str, n: int) -> list[float]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        producer.send("latency", b"warm-up").get(60)
        out = []
        for i in range(n):
            start = time.perf_counter()
            producer.send("latency", key=str(i).encode(), value=b"x" * 100).get(60)
            out.append(time.perf_counter() - start)
        return out
    finally:
        producer.close()


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--records", type=int, default=2000, help="produce requests per latency phase")
    args = parser.parse_args()
    metrics_port = free_port()
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-explain-") as tmp, \
            BrokerProcess(tmp, overrides={"metrics.port": metrics_port, "log.cleaner.backoff.ms": 1000}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([
            NewTopic("compacted", args.partitions, 1, topic_configs={"cleanup.policy": "compact",
                                                                     "segment.bytes": "1024",
                                                                     # never eligible: the cleaner stays idle, every
                                                                     # partition is explained in full
                                                                     "min.cleanable.dirty.ratio": "1"}),
            NewTopic("latency", 1, 1)])
        admin.close()
        from confluent_kafka import Producer

        loader = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for p in range(args.partitions):
            for i in range(40):
                loader.produce("compacted", key=f"k{i % 8}".encode(), value=b"v" * 60, partition=p)
            loader.poll(0)
        assert loader.flush(120) == 0, "records left undelivered"
        url = f"http://127.0.0.1:{metrics_port}/api/cleaner"
        fresh, cached = [], []
        for _ in range(10):  # a request after the snapshot interval computes; one right after reuses it
            time.sleep(0.6)
            for times in (fresh, cached):
                start = time.perf_counter()
                body = urllib.request.urlopen(url, timeout=60).read()
                times.append(time.perf_counter() - start)
        print(f"GET /api/cleaner, {args.partitions} compacted partitions ({len(body)} bytes): computed "
              f"median {statistics.median(fresh) * 1000:.1f} ms, from the snapshot {statistics.median(cached) * 1000:.1f} ms")

        print(f"produce p50/p99, {args.records} requests:")
        for label, pause in (("idle", None), ("GET /api/cleaner every second", 1.0),
                             ("GET /api/cleaner back to back", 0.0)):
            stop = threading.Event()
            served = [0]

            def poll(pause: float, stop: threading.Event, served: list[int]) -> None:
                while not stop.is_set():
                    urllib.request.urlopen(url, timeout=60).read()
                    served[0] += 1
                    stop.wait(pause)

            poller = threading.Thread(target=poll, args=(pause, stop, served), daemon=True)
            if pause is not None:
                poller.start()
            start = time.monotonic()
            latencies = produce_latencies(broker.bootstrap, args.records)
            elapsed = time.monotonic() - start
            stop.set()
            if pause is not None:
                poller.join(60)
            print(f"  {label:32} {pct(latencies, 0.5):6.2f} / {pct(latencies, 0.99):6.2f} ms"
                  f"  ({served[0] / elapsed:.1f} req/s)")


if __name__ == "__main__":
    main()
