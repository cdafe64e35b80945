"""A consumer-group member in its own process, for one Python client library.

    python tests/groups/member.py CLIENT BOOTSTRAP TOPIC GROUP SECONDS

CLIENT is kafka-python, confluent, aiokafka or confluent-consumer-protocol (librdkafka, KIP-848). Prints JSON lines like tests/java/GroupClient.java `member`:
{"assigned": [partitions]} after every assignment, {"p", "o", "v"} per record, {"commit": n} after each
synchronous commit, {"closed": true} at the end. "close" on stdin closes the consumer cleanly (LeaveGroup);
SIGKILL simulates a crash. Session timeout 6 s (the broker minimum) so takeovers are quick.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

SESSION_MS = 6000
HEARTBEAT_MS = 1000


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def emit_records(records: Iterable[tuple[int, int, bytes]]) -> int:
    """One {"p", "o", "v"} line per (partition, offset, value); returns how many."""
    n = 0
    for partition, offset, value in records:
        emit({"p": partition, "o": offset, "v": value.decode()})
        n += 1
    return n


def watch_stdin(flag: threading.Event) -> None:
    def run() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        flag.set()

    threading.Thread(target=run, daemon=True).start()


def run_kafka_python(bootstrap: str, topic: str, group: str, deadline: float, closing: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, client_id="member-kafka-python")

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit({"assigned": sorted(tp.partition for tp in consumer.assignment())})

    consumer.subscribe([topic], listener=Listener())
    while not closing.is_set() and time.time() < deadline:
        batches = consumer.poll(timeout_ms=200)
        n = emit_records((r.partition, r.offset, r.value) for records in batches.values() for r in records)
        if n:
            consumer.commit()
            emit({"commit": n})
    consumer.close()
    emit({"closed": True})


def run_confluent(bootstrap: str, topic: str, group: str, deadline: float, closing: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_MS,
                         "heartbeat.interval.ms": HEARTBEAT_MS, "client.id": "member-confluent"})

    def on_assign(c: Any, partitions: Any) -> None:
        emit({"assigned": sorted(tp.partition for tp in partitions)})

    consumer.subscribe([topic], on_assign=on_assign)
    while not closing.is_set() and time.time() < deadline:
        msgs = consumer.consume(num_messages=500, timeout=0.2)
        n = emit_records((m.partition(), m.offset(), m.value()) for m in msgs if not m.error())
        if n:
            consumer.commit(asynchronous=False)
            emit({"commit": n})
    consumer.close()
    emit({"closed": True})


def commit_until_current(consumer: Any) -> None:
    """A synchronous commit, again while the broker says STALE_MEMBER_EPOCH: a heartbeat answered with a new
    member epoch that librdkafka has not applied yet makes a commit stale, in Kafka as here
    (ConsumerGroup.validateMemberEpoch). librdkafka hands that error to the application; the Java client
    retries such a commit itself."""
    from confluent_kafka import KafkaError, KafkaException

    for _ in range(100):
        try:
            consumer.commit(asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                raise
            emit({"stale_commit": True})
            time.sleep(0.05)  # librdkafka's background thread applies the new epoch meanwhile
    raise RuntimeError("the member epoch stayed stale for 100 commits")


def run_confluent_consumer_protocol(bootstrap: str, topic: str, group: str, deadline: float,
                                   closing: threading.Event) -> None:
    """librdkafka with `group.protocol=consumer` (KIP-848): the broker assigns, partitions move incrementally."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "client.id": "member-confluent-848"})

    def on_change(c: Any, partitions: Any) -> None:
        # incremental: the callback gets the added partitions before they join c.assignment()
        emit({"assigned": sorted({tp.partition for tp in c.assignment()} | {tp.partition for tp in partitions})})

    def on_revoke(c: Any, partitions: Any) -> None:
        # incremental: only the revoked partitions; what remains is the assignment minus them
        gone = {tp.partition for tp in partitions}
        emit({"assigned": sorted(tp.partition for tp in c.assignment() if tp.partition not in gone)})

    consumer.subscribe([topic], on_assign=on_change, on_revoke=on_revoke)
    while not closing.is_set() and time.time() < deadline:
        msgs = consumer.consume(num_messages=500, timeout=0.2)
        n = emit_records((m.partition(), m.offset(), m.value()) for m in msgs if not m.error())
        if n:
            commit_until_current(consumer)
            emit({"commit": n})
    consumer.close()
    emit({"closed": True})


def run_aiokafka(bootstrap: str, topic: str, group: str, deadline: float, closing: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    async def main() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                                    heartbeat_interval_ms=HEARTBEAT_MS, client_id="member-aiokafka")

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            async def on_partitions_assigned(self, assigned: Any) -> None:
                emit({"assigned": sorted(tp.partition for tp in assigned)})

        await consumer.start()
        consumer.subscribe([topic], listener=Listener())
        try:
            while not closing.is_set() and time.time() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                n = emit_records((r.partition, r.offset, r.value) for recs in batches.values() for r in recs)
                if n:
                    await consumer.commit()
                    emit({"commit": n})
        finally:
            await consumer.stop()
        emit({"closed": True})

    asyncio.run(main())


RUNNERS = {"kafka-python": run_kafka_python, "confluent": run_confluent, "aiokafka": run_aiokafka,
           "confluent-consumer-protocol": run_confluent_consumer_protocol}


def main() -> None:
    client, bootstrap, topic, group, seconds = sys.argv[1:6]
    closing = threading.Event()
    watch_stdin(closing)
    RUNNERS[client](bootstrap, topic, group, time.time() + float(seconds), closing)


if __name__ == "__main__":
    main()
