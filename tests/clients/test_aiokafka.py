"""aiokafka: 20,000 keyed records with headers per codec, read back exactly."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from .records import (
    CODECS,
    COUNT,
    PARTITIONS,
    Rec,
    assert_round_trip,
    headers,
    key,
    normalize_headers,
    value,
)


async def produce(bootstrap: str, topic: str, codec: str, base_ts: int, count: int = COUNT) -> None:
    # aiokafka's default is idempotence off, which is what this suite wants.
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        max_batch_size=131072,
        request_timeout_ms=60000,
    )
    await producer.start()
    try:
        deliveries = []
        for i in range(count):
            deliveries.append(
                await producer.send(
                    topic,
                    key=key(i),
                    value=value(i),
                    headers=list(headers(i, codec)),
                    partition=i % PARTITIONS,
                    timestamp_ms=base_ts + i,
                )
            )
        results = await asyncio.wait_for(asyncio.gather(*deliveries), timeout=180)
        assert [(md.partition, md.offset) for md in results] == [
            (i % PARTITIONS, i // PARTITIONS) for i in range(count)
        ]
    finally:
        await producer.stop()


async def consume(bootstrap: str, topic: str, count: int = COUNT, partitions: int = PARTITIONS) -> list[Rec]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    got: list[Rec] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 180
        while len(got) < count and loop.time() < deadline:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            for recs in batch.values():
                for r in recs:
                    assert r.timestamp_type == 0, "CreateTime expected"
                    got.append(
                        Rec(r.partition, r.offset, r.timestamp, r.key, r.value, normalize_headers(r.headers))
                    )
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(tidelog_module_broker, codec: str) -> None:
    assert_round_trip(
        tidelog_module_broker,
        f"aiokafka-{codec}",
        codec,
        lambda *args: asyncio.run(produce(*args)),
        lambda *args: asyncio.run(consume(*args)),
    )
