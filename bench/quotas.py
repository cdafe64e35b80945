"""Client byte-rate quotas (Kafka's ClientQuotaManager, KIP-219): how closely a producer and a consumer under
`producer_byte_rate` / `consumer_byte_rate` are held to their quota, next to an unquota'd producer on the same
broker. Prints figures only; there is no pass/fail (tests/broker/test_client_quotas.py asserts the bound).

    python bench/quotas.py [--quota BYTES_PER_S] [--seconds S] [--window-num N]

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
    cls = request_class(49)[1]
    E = cls.EntryData
    entries = [E(entity=[E.EntityData(entity_type="client-id", entity_name=client)],
                 ops=[E.OpData(key=key, value=float(quota), remove=False)])
               for client, key in (("bench-slow-producer", "producer_byte_rate"),
                                   ("bench-slow-consumer", "consumer_byte_rate"))]
    with KafkaWire(bootstrap) as wire:
        response = wire.request(49, 1, cls(entries=entries, validate_only=False))
    assert all(e.error_code == 0 for e in response.entries)


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quota", type=int, default=500_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--window-num", type=int, default=11, help="quota.window.num (Kafka's default)")
    parser.add_argument("--fetch-bytes", type=int, default=262_144, help="the consumer's max.partition.fetch.bytes")
    args = parser.parse_args()
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
        for kind, rows in b.state.quotas.metric_rows().items():
            for _user, client, byte_rate, throttle in rows:
                print(f"  broker {kind:7s} client-id={client:22s} byte-rate {byte_rate:12,.0f}  "
                      f"throttle-time avg {throttle:7.1f} ms")


if __name__ == "__main__":
    main()
