"""Each fault of the test handle against aiokafka, as pytest-asyncio tests: retried, reported once, delayed,
survived, kept. The handle's controls are plain calls: the broker runs on its own thread and loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tidelog.testing import BrokerHandle, async_run_broker

pytestmark = [pytest.mark.tidelog(topics={"orders": 2}), pytest.mark.asyncio]


async def started_producer(broker: BrokerHandle, **config: Any) -> Any:
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **{"retry_backoff_ms": 50, **config})
    await p.start()
    return p


async def consume(broker: BrokerHandle, count: int, partitions: tuple[int, ...] = (0, 1), **config: Any) -> list[Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **config)
    await c.start()
    try:
        c.assign([TopicPartition("orders", p) for p in partitions])
        return await poll(c, count)
    finally:
        await c.stop()


async def poll(c: Any, count: int, timeout: float = 60.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in (await c.getmany(timeout_ms=200)).values():
            got.extend(records)
    return got


async def test_retriable_produce_errors_are_retried(tidelog_broker: BrokerHandle) -> None:
    tidelog_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
    p = await started_producer(tidelog_broker)
    try:
        assert (await p.send_and_wait("orders", b"v", partition=0)).offset == 0
    finally:
        await p.stop()
    assert tidelog_broker.faults.pending_errors("Produce") == 0
    assert [r.value for r in tidelog_broker.records("orders")] == [b"v"]


async def test_non_retriable_produce_error_reaches_the_application_once(tidelog_broker: BrokerHandle) -> None:
    from aiokafka.errors import InvalidTimestampError

    tidelog_broker.inject_errors("Produce", ["INVALID_TIMESTAMP"])
    p = await started_producer(tidelog_broker)
    try:
        with pytest.raises(InvalidTimestampError):
            await p.send_and_wait("orders", b"rejected", partition=0)
        assert (await p.send_and_wait("orders", b"accepted", partition=0)).offset == 0
    finally:
        await p.stop()
    assert [r.value for r in tidelog_broker.records("orders")] == [b"accepted"]


async def test_fetch_and_commit_errors_are_retried_by_the_consumer(tidelog_broker: BrokerHandle) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    p = await started_producer(tidelog_broker)
    try:
        for i in range(4):
            await p.send_and_wait("orders", b"%d" % i, partition=i % 2)
    finally:
        await p.stop()
    tidelog_broker.inject_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH"])
    tidelog_broker.inject_errors("OffsetCommit", ["COORDINATOR_LOAD_IN_PROGRESS"])
    c = AIOKafkaConsumer(bootstrap_servers=tidelog_broker.bootstrap, group_id="g", auto_offset_reset="earliest",
                         enable_auto_commit=False, retry_backoff_ms=50)
    await c.start()
    try:
        c.assign([TopicPartition("orders", 0), TopicPartition("orders", 1)])
        assert sorted(r.value for r in await poll(c, 4)) == [b"0", b"1", b"2", b"3"]
        await c.commit()  # answered with the retriable error first, then retried
    finally:
        await c.stop()
    assert tidelog_broker.faults.pending_errors("Fetch") == 0
    assert tidelog_broker.faults.pending_errors("OffsetCommit") == 0
    assert tidelog_broker.committed_offsets("g") == {("orders", 0): 2, ("orders", 1): 2}


async def test_latency_is_observed(tidelog_broker: BrokerHandle) -> None:
    p = await started_producer(tidelog_broker)
    try:
        await p.send_and_wait("orders", b"warm", partition=0)
        tidelog_broker.set_latency(400, "Produce")
        started = time.monotonic()
        await p.send_and_wait("orders", b"slow", partition=0)
        assert time.monotonic() - started >= 0.4
    finally:
        await p.stop()


async def test_pause_and_resume_are_survived(tidelog_broker: BrokerHandle) -> None:
    p = await started_producer(tidelog_broker)
    try:
        await p.send_and_wait("orders", b"before", partition=0)
        tidelog_broker.pause()
        send = asyncio.ensure_future(p.send_and_wait("orders", b"while-paused", partition=0))
        await asyncio.sleep(1.0)
        assert not send.done()
        tidelog_broker.resume()
        assert (await asyncio.wait_for(send, 60)).offset == 1
    finally:
        await p.stop()
    assert [r.value for r in tidelog_broker.records("orders", 0)] == [b"before", b"while-paused"]


async def test_producer_times_out_while_paused(tidelog_broker: BrokerHandle) -> None:
    from aiokafka.errors import KafkaTimeoutError, NodeNotReadyError

    p = await started_producer(tidelog_broker, request_timeout_ms=1_000)
    try:
        await p.send_and_wait("orders", b"before", partition=0)
        tidelog_broker.pause()
        # The batch expires after request_timeout_ms; aiokafka reports the last cause (the node stayed down).
        with pytest.raises((KafkaTimeoutError, NodeNotReadyError)):
            await p.send_and_wait("orders", b"lost", partition=0)
    finally:
        tidelog_broker.resume()
        await p.stop()


async def test_consumer_survives_dropped_connections(tidelog_broker: BrokerHandle) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    p = await started_producer(tidelog_broker)
    c = AIOKafkaConsumer(bootstrap_servers=tidelog_broker.bootstrap, auto_offset_reset="earliest")
    await c.start()
    try:
        c.assign([TopicPartition("orders", 0)])
        await p.send_and_wait("orders", b"one", partition=0)
        assert [r.value for r in await poll(c, 1)] == [b"one"]
        assert tidelog_broker.drop_connections() >= 2
        await p.send_and_wait("orders", b"two", partition=0)
        assert [r.value for r in await poll(c, 1)] == [b"two"]
    finally:
        await c.stop()
        await p.stop()


async def test_restart_keeps_every_acknowledged_record() -> None:
    # The `async with` form of the broker, for suites that start it inside their own coroutines.
    async with async_run_broker(topics={"orders": 2}) as broker:
        p = await started_producer(broker)
        acked: list[tuple[int, int]] = []
        try:
            for i in range(20):
                md = await p.send_and_wait("orders", b"%d" % i, partition=i % 2)
                acked.append((md.partition, md.offset))
            await asyncio.to_thread(broker.restart)
            for i in range(20, 40):
                md = await p.send_and_wait("orders", b"%d" % i, partition=i % 2)
                acked.append((md.partition, md.offset))
        finally:
            await p.stop()
        assert set(acked) <= {(r.partition, r.offset) for r in broker.records("orders")}
        got = await consume(broker, len(acked))
        assert {(r.partition, r.offset) for r in got} == set(acked)
