"""Produce a stream of keyed updates and tombstones to a compacted topic (the example pipeline's input).

    python -m tidelog.pipeline.examples.updates --bootstrap localhost:9092 --topic customer-balances

Each record is keyed by customer id; its value is JSON {"customer", "balance", "seq"}, or null (a tombstone: the
customer was deleted). The topic is created with cleanup.policy=compact so the broker's log cleaner keeps only the
latest record per key, which is exactly what the snapshot job materialises.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

VALUE_SCHEMA = "customer string, balance long, seq long"


def create_compacted_topic(
    bootstrap: str, topic: str, partitions: int = 3, config: Mapping[str, str] | None = None
) -> None:
    """CreateTopics with cleanup.policy=compact (plus `config`); an existing topic is left as it is."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    try:
        configs = {"cleanup.policy": "compact", **(config or {})}
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)], timeout_ms=60_000)
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def generate(keys: int, updates: int, tombstone_every: int, seed: int) -> list[tuple[str, bytes | None]]:
    """`updates` records over `keys` customers; every `tombstone_every`-th record deletes its customer."""
    rng = random.Random(seed)
    records: list[tuple[str, bytes | None]] = []
    for seq in range(updates):
        key = f"customer-{rng.randrange(keys):05d}"
        if tombstone_every and seq % tombstone_every == tombstone_every - 1:
            records.append((key, None))
        else:
            value = {"customer": key, "balance": rng.randrange(-10_000, 100_000), "seq": seq}
            records.append((key, json.dumps(value, sort_keys=True).encode()))
    return records


def latest_per_key(records: list[tuple[str, bytes | None]]) -> dict[str, bytes]:
    """What a fully compacted topic holds: each key's last value, deleted keys absent."""
    latest: dict[str, bytes | None] = {}
    for key, value in records:
        latest[key] = value
    return {k: v for k, v in latest.items() if v is not None}


def produce(bootstrap: str, topic: str, records: list[tuple[str, bytes | None]]) -> None:
    # Keyed records go through the default (murmur2) partitioner, so every update of a key lands in the same
    # partition, in order: compaction and the snapshot job both rely on that.
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20)
    try:
        for key, value in records:
            producer.send(topic, key=key.encode(), value=value)
        producer.flush()
    finally:
        producer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--topic", default="customer-balances")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=20_000)
    parser.add_argument("--tombstone-every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    create_compacted_topic(args.bootstrap, args.topic, args.partitions)
    records = generate(args.keys, args.updates, args.tombstone_every, args.seed)
    produce(args.bootstrap, args.topic, records)
    live = latest_per_key(records)
    print(f"produced {len(records)} records to {args.topic}; {len(live)} keys are live, "
          f"{len({k for k, _ in records}) - len(live)} deleted")


if __name__ == "__main__":
    main()
