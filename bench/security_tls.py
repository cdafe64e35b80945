"""TLS and SASL cost on produce and consume, next to PLAINTEXT, in one run against one in-process broker.
Prints figures only; there is no pass/fail.

For each of PLAINTEXT, SASL_PLAINTEXT (SCRAM-SHA-512), SSL and SASL_SSL (SCRAM-SHA-512): confluent-kafka
produces N records of S bytes (acks=all, lz4 off) and a consumer reads them back; MB/s and records/s of each,
plus the connection set-up time (TCP + TLS + SASL + ApiVersions + Metadata) of a fresh client.

    python bench/security_tls.py [--records N] [--size BYTES]

Roughly half a minute with the defaults on a small machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tidelog.testing import run_secure_broker  # noqa: E402

LISTENERS = [("PLAINTEXT", None), ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SSL", None), ("SASL_SSL", "SCRAM-SHA-512")]


def run_one(b, listener: str, mech: str | None, records: int, size: int) -> dict[str, float]:  # noqa: ANN001
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    conf = b.confluent_config(listener, mech or "PLAIN")
    if listener == "PLAINTEXT":
        conf = {"bootstrap.servers": b.listeners["PLAINTEXT"]}
    started = time.perf_counter()
    AdminClient(conf).list_topics(timeout=30)
    setup_s = time.perf_counter() - started
    topic = f"bench-{listener.lower().replace('_', '-')}-{records}"
    payload = os.urandom(size)
    producer = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": "all",
                         "queue.buffering.max.messages": records + 10})
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(records):
        producer.produce(topic, payload)
        producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - started
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "fetch.max.bytes": 50 << 20})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group join in the measurement
    seen = 0
    started = time.perf_counter()
    while seen < records + 1:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                seen += 1
    consume_s = time.perf_counter() - started
    consumer.close()
    mb = records * size / 1e6
    return {"setup_ms": setup_s * 1000, "produce_mb_s": mb / produce_s, "produce_rec_s": records / produce_s,
            "consume_mb_s": mb / consume_s, "consume_rec_s": records / consume_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    with run_secure_broker(ssl_client_auth="none") as b:
        run_one(b, "PLAINTEXT", None, 100, 16)  # warm the broker's imports and the client library
        results = {name: run_one(b, name, mech, args.records, args.size) for name, mech in LISTENERS}
    base = results["PLAINTEXT"]
    print(f"{args.records} records of {args.size} B, confluent-kafka, one in-process broker")
    print(f"{'listener':<16}{'setup ms':>10}{'produce MB/s':>14}{'vs plain':>10}{'consume MB/s':>14}{'vs plain':>10}")
    for name, r in results.items():
        print(f"{name:<16}{r['setup_ms']:>10.1f}{r['produce_mb_s']:>14.1f}{r['produce_mb_s'] / base['produce_mb_s']:>10.2f}"
              f"{r['consume_mb_s']:>14.1f}{r['consume_mb_s'] / base['consume_mb_s']:>10.2f}")


if __name__ == "__main__":
    main()
