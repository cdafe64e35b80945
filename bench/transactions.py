"""Transactional produce throughput next to idempotent produce: the same records (keys, 200-byte values,
3 partitions) through confluent-kafka against one tidelog broker subprocess, in one run. The transactional
producer commits every --txn-size records (AddPartitionsToTxn, markers on every partition, EndTxn per
commit), so the difference is the cost of the transaction protocol. Prints figures only; no pass/fail.

    python bench/transactions.py [--count N] [--txn-size N] [--max-seconds S]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tidelog.testing import BrokerProcess  # noqa: E402 - runnable from a checkout without installing

PARTITIONS = 3
VALUE = b"x" * 200


def run(bootstrap: str, topic: str, count: int, txn_size: int | None, max_seconds: float) -> tuple[int, float, int]:
    """(records acknowledged, seconds, transactions committed)."""
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if txn_size is not None:
        conf["transactional.id"] = f"bench-{topic}"
    producer = Producer(conf)
    acked = 0

    def on_delivery(err, _msg) -> None:  # noqa: ANN001 - librdkafka callback signature
        nonlocal acked
        if err is None:
            acked += 1

    # warm-up outside the timed part: producer id, metadata, connections, the partitions' first batches
    if txn_size is not None:
        producer.init_transactions(60)
        producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, key=b"warm-up", value=VALUE, partition=p)
    producer.commit_transaction(60) if txn_size is not None else producer.flush(60)
    producer.poll(0)
    acked = 0
    start = time.perf_counter()
    sent = txns = 0
    while sent < count and time.perf_counter() - start < max_seconds:
        if txn_size is not None:
            producer.begin_transaction()
        end = min(count, sent + (txn_size or count))
        while sent < end:
            try:
                producer.produce(topic, key=b"%d" % sent, value=VALUE, partition=sent % PARTITIONS,
                                 on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        if txn_size is not None:
            producer.commit_transaction(60)  # flushes the transaction's records first
            txns += 1
    producer.flush(60)
    return acked, time.perf_counter() - start, txns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--txn-size", type=int, default=1_000)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tidelog-bench-txn-") as tmp:
        with BrokerProcess(os.path.join(tmp, "data"), overrides={"transaction.state.log.num.partitions": 5}) as b:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            for name in ("bench-idempotent", "bench-transactional"):
                admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(60)
            for label, topic, txn_size in (("idempotent", "bench-idempotent", None),
                                           ("transactional", "bench-transactional", args.txn_size)):
                acked, seconds, txns = run(b.bootstrap, topic, args.count, txn_size, args.max_seconds)
                extra = f", {txns} commits of {args.txn_size}" if txn_size else ""
                print(f"{label:>14}: {acked:>9,} records in {seconds:6.2f} s = {acked / seconds:>10,.0f} rec/s{extra}")


if __name__ == "__main__":
    main()
