"""Produce and consume throughput of a tidelog broker started as a subprocess, with confluent-kafka
(librdkafka) as the load client. Prints figures only; there is no pass/fail.

    python bench/throughput.py [--count N] [--size BYTES] [--partitions P] [--compression CODEC]

Bounded: each phase stops after --count records or --max-seconds, whichever comes first.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tidelog.testing import BrokerProcess  # noqa: E402 - runnable from a checkout without installing


def report(phase: str, count: int, nbytes: int, seconds: float) -> None:
    seconds = max(seconds, 1e-9)
    print(
        f"{phase:>8}: {count:>9,} msgs in {seconds:6.2f} s = {count / seconds:>10,.0f} msgs/s, "
        f"{nbytes / seconds / 1e6:7.2f} MB/s (values only)"
    )


def produce(bootstrap: str, topic: str, count: int, size: int, compression: str, max_seconds: float) -> int:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 10,
            "batch.size": 1_000_000,
            "compression.type": compression,
            "queue.buffering.max.messages": 200_000,
        }
    )
    payload = os.urandom(size // 2).hex().encode()[:size]
    delivered = 0

    def on_delivery(err, _msg) -> None:  # noqa: ANN001 - librdkafka callback signature
        nonlocal delivered
        if err is None:
            delivered += 1

    start = time.perf_counter()
    sent = 0
    while sent < count and time.perf_counter() - start < max_seconds:
        try:
            producer.produce(topic, value=payload, key=str(sent).encode(), on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        if sent % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    report("produce", delivered, delivered * size, time.perf_counter() - start)
    return delivered


def consume(bootstrap: str, topic: str, partitions: int, count: int, max_seconds: float) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    start = time.perf_counter()
    got = nbytes = 0
    while got < count and time.perf_counter() - start < max_seconds:
        for m in consumer.consume(num_messages=10_000, timeout=1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    report("consume", got, nbytes, time.perf_counter() - start)
    consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=200, help="value size in bytes")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--max-seconds", type=float, default=60.0, help="time cap per phase")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as log_dir:
        broker = BrokerProcess(log_dir=log_dir).start()
        try:
            topic = "bench"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # must outlive its futures
            futures = admin.create_topics(
                [NewTopic(topic, num_partitions=args.partitions, replication_factor=1)]
            )
            futures[topic].result(timeout=60)
            print(
                f"tidelog at {broker.bootstrap}: {args.count:,} x {args.size} B, "
                f"{args.partitions} partitions, compression={args.compression}"
            )
            n = produce(broker.bootstrap, topic, args.count, args.size, args.compression, args.max_seconds)
            consume(broker.bootstrap, topic, args.partitions, n, args.max_seconds)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
