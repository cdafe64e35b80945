"""Client quotas: how closely clients are held to them, next to unquota'd clients on the same broker. Prints
figures only; there is no pass/fail (tests/broker/test_client_quotas.py and test_request_mutation_quotas.py
assert the behaviour).

    python bench/quotas.py [--quota BYTES_PER_S] [--seconds S] [--window-num N]      byte rates (KIP-219)
    python bench/quotas.py --mode request [--percentage P] [--seconds S]             request_percentage (KIP-124)
    python bench/quotas.py --mode mutation [--rate PARTITIONS_PER_S] [--seconds S]   controller_mutation_rate

Byte rates: a producer and a consumer under `producer_byte_rate` / `consumer_byte_rate`.
Request: a producer sending small acks=1 batches as fast as it can under `request_percentage`; the broker's own
`request-time` (the percentage of the event loop spent on it) is sampled each second and compared with the quota.
Mutation: a client creating 1-partition topics with CreateTopics v5 (permissive: always accepted, throttled)
under `controller_mutation_rate`; the partitions created per second after the first burst (quota *
quota.window.num * window) are compared with the quota.

The steady rate skips the first quota.window.num seconds (a new client may burst quota.window.num - 1 windows'
worth before its first throttle, as in Kafka, and the burst must leave the window) and counts payload bytes
acknowledged / received, so it sits a little under the quota, which Kafka applies to request and response bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.protocol.messages import request_class  # noqa: E402
from tidelog.testing import KafkaWire, run_broker  # noqa: E402


def set_quotas(bootstrap: str, quota: int) -> None:
    for client, key in (("bench-slow-producer", "producer_byte_rate"), ("bench-slow-consumer", "consumer_byte_rate")):
        set_quota(bootstrap, client, key, float(quota))


def produce(bootstrap: str, client_id: str, topic: str, seconds: float, out: dict[str, Any]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, acks=1)
    value = b"q" * 1000
    acked: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for f in [producer.send(topic, value) for _ in range(50)]:
            f.get(timeout=60)
        acked.append((time.monotonic(), 50_000))
    producer.close()
    out["acked"] = acked


def consume(bootstrap: str, topic: str, seconds: float, fetch_bytes: int, out: dict[str, Any]) -> None:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, client_id="bench-slow-consumer",
                             auto_offset_reset="earliest", max_partition_fetch_bytes=fetch_bytes,
                             consumer_timeout_ms=int(seconds * 1000) + 5000)
    received: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    for record in consumer:
        received.append((time.monotonic(), len(record.value)))
        if time.monotonic() > end:
            break
    consumer.close()
    out["received"] = received


def rate(points: list[tuple[float, int]], skip: float) -> float:
    """Bytes per second after the first `skip` seconds (the burst a new client gets)."""
    if len(points) < 2:
        return 0.0
    start = points[0][0] + skip
    end = points[-1][0]
    return sum(n for t, n in points if start < t <= end) / max(end - start, 1e-9)


def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    with KafkaWire(bootstrap) as wire:
        wire.alter_client_quota("client-id", client_id, key, value)


def produce_small(bootstrap: str, client_id: str, topic: str, seconds: float, out: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 1,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    acked = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            producer.produce(topic, b"r" * 100)
        producer.flush(60)
        acked += 10
    out["acked"], out["throttles"] = acked, throttles  # ThrottleEvent.throttle_time is in seconds


def bench_request(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, run_broker(tmp, overrides={"quota.window.num": args.window_num}) as b:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("bench-busy", 1, 1), NewTopic("bench-calm", 1, 1)])
        admin.close()
        set_quota(b.bootstrap, "bench-busy", "request_percentage", args.percentage)
        busy: dict[str, Any] = {}
        calm: dict[str, Any] = {}
        threads = [threading.Thread(target=produce_small, args=(b.bootstrap, "bench-busy", "bench-busy",
                                                                args.seconds, busy)),
                   threading.Thread(target=produce_small, args=(b.bootstrap, "bench-calm", "bench-calm",
                                                                args.seconds, calm))]
        for t in threads:
            t.start()
        samples: list[dict[str, float]] = []
        while any(t.is_alive() for t in threads):
            time.sleep(1.0)
            samples.append({client: rate for _, client, rate, _ in b.state.quotas.request.metrics()})
        for t in threads:
            t.join()
        steady = samples[args.window_num:] or samples
        print(f"request_percentage {args.percentage} %, quota.window.num {args.window_num}, {args.seconds:.0f} s")
        for client, out in (("bench-busy", busy), ("bench-calm", calm)):
            pct = [s.get(client, 0.0) for s in steady]
            print(f"  {client:11s} request-time avg {sum(pct) / max(len(pct), 1):7.2f} % (max {max(pct):7.2f} %) "
                  f"of the event loop, {out['acked'] / args.seconds:9,.0f} msg/s, "
                  f"{len(out['throttles'])} throttle events (max {max(out['throttles'], default=0) * 1000:.0f} ms)")


def bench_mutation(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, run_broker(tmp, overrides={"quota.window.num": args.window_num}) as b:
        set_quota(b.bootstrap, "bench-mutator", "controller_mutation_rate", args.rate)
        cls = request_class(19)[5]  # permissive: every topic is created, the connection is throttled
        created: list[float] = []
        with KafkaWire(b.bootstrap, client_id="bench-mutator") as wire:
            start = time.monotonic()
            while time.monotonic() < start + args.seconds:
                name = f"bench-m-{len(created)}"
                response = wire.request(19, 5, cls(topics=[cls.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                    timeout_ms=30_000, validate_only=False))
                assert response.topics[0].error_code == 0, response
                created.append(time.monotonic())
        burst = args.rate * args.window_num
        steady = [t for t in created if t > start + args.window_num]
        span = created[-1] - (start + args.window_num)
        print(f"controller_mutation_rate {args.rate}/s, quota.window.num {args.window_num} (burst {burst:.0f}), "
              f"{args.seconds:.0f} s")
        print(f"  {len(created)} partitions created, {len(steady) / max(span, 1e-9):.2f}/s after the first "
              f"{args.window_num} s ({len(steady) / max(span, 1e-9) / args.rate * 100:.0f} % of the quota)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["bytes", "request", "mutation"], default="bytes")
    parser.add_argument("--percentage", type=float, default=5.0, help="request_percentage (--mode request)")
    parser.add_argument("--rate", type=float, default=5.0, help="controller_mutation_rate (--mode mutation)")
    parser.add_argument("--quota", type=int, default=500_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--window-num", type=int, default=11, help="quota.window.num (Kafka's default)")
    parser.add_argument("--fetch-bytes", type=int, default=262_144, help="the consumer's max.partition.fetch.bytes")
    args = parser.parse_args()
    if args.mode == "request":
        bench_request(args)
        return
    if args.mode == "mutation":
        bench_mutation(args)
        return
    from kafka.admin import KafkaAdminClient, NewTopic

    with tempfile.TemporaryDirectory() as tmp, run_broker(tmp, overrides={"quota.window.num": args.window_num}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("bench-quota", 1, 1), NewTopic("bench-free", 1, 1)])
        admin.close()
        set_quotas(b.bootstrap, args.quota)
        slow: dict[str, Any] = {}
        free: dict[str, Any] = {}
        read: dict[str, Any] = {}
        # all three at once; the consumer reads the unquota'd producer's topic, which always has plenty
        threads = [threading.Thread(target=produce, args=(b.bootstrap, "bench-slow-producer", "bench-quota",
                                                          args.seconds, slow)),
                   threading.Thread(target=produce, args=(b.bootstrap, "bench-free-producer", "bench-free",
                                                          args.seconds, free)),
                   threading.Thread(target=consume, args=(b.bootstrap, "bench-free", args.seconds,
                                                          args.fetch_bytes, read))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        received = read["received"]
        print(f"quota {args.quota:,} B/s, quota.window.num {args.window_num}, {args.seconds:.0f} s per client")
        # the burst a new client gets lasts until its first samples leave the window
        skip = float(args.window_num)
        print(f"  steady rate (after the first {skip:.0f} s) / whole-run average, payload bytes:")
        for name, points in (("quota'd producer", slow["acked"]), ("unquota'd producer", free["acked"]),
                             ("quota'd consumer", received)):
            steady = rate(points, skip)
            whole = rate(points, 0.0)
            print(f"  {name:20s} {steady:12,.0f} B/s ({steady / args.quota * 100:6.1f} % of quota)  "
                  f"{whole:12,.0f} B/s ({whole / args.quota * 100:6.1f} %)")
        for kind, rows in list(b.state.quotas.metric_rows().items())[:2]:  # Produce, Fetch
            for _user, client, byte_rate, throttle in rows:
                print(f"  broker {kind:7s} client-id={client:22s} byte-rate {byte_rate:12,.0f}  "
                      f"throttle-time avg {throttle:7.1f} ms")


if __name__ == "__main__":
    main()
