"""The coordinators load after the broker is ready (`tidelog serve`'s start-up, `run_broker(load_services_after_ready=
True)`): Metadata, Produce and Fetch are served at once while the coordinator APIs answer what Kafka's loading
coordinators answer (GroupCoordinatorService / TransactionStateManager: COORDINATOR_LOAD_IN_PROGRESS; Heartbeat
NONE; FindCoordinator names this broker), and real clients retry through it. The load is held open by a hook at
FaultPoint.COORDINATORS_LOAD, so nothing here depends on timing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.storage.fault_hooks import FaultPoint
from tidelog.testing import BrokerHandle, KafkaWire, run_broker
from tidelog.testing_support import join_warm_up_threads

TOPIC, GROUP, TXN_ID = "loading", "loading-group", "loading-txn"
OVERRIDES = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3,
             "transaction.state.log.num.partitions": 3}
SEEDED_OFFSET = 2  # committed by the first run: the restarted group resumes there once its state is loaded


class HoldCoordinatorLoad:
    """FaultHooks: BrokerState.build_services waits at COORDINATORS_LOAD until `release` is set."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def at(self, point: Any, subject: object = None) -> None:
        if point == FaultPoint.COORDINATORS_LOAD:
            self.reached.set()
            self.release.wait(120)


def _seed(log_dir: Path) -> int:
    """A first run leaves 5 records, offsets committed by GROUP and a transactional id (returns its epoch), so
    the restarted broker has __consumer_offsets and __transaction_state to load."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with run_broker(log_dir, overrides=OVERRIDES, topics={TOPIC: 1}) as b:
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=TXN_ID)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            for i in range(5):
                producer.send(TOPIC, value=b"v%d" % i, partition=0)
            producer.commit_transaction()
        finally:
            producer.close(10)
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=GROUP, enable_auto_commit=False)
        try:
            from kafka.structs import OffsetAndMetadata

            consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(SEEDED_OFFSET, "", -1)})
        finally:
            consumer.close()
        return _txn_epoch(b)


def _txn_epoch(b: BrokerHandle) -> int:
    meta = b.call(lambda: b.state.txn_coordinator.state.get(TXN_ID))
    assert meta is not None
    return int(meta.producer_epoch)


@contextmanager
def _loading_broker(log_dir: Path) -> Iterator[tuple[BrokerHandle, HoldCoordinatorLoad]]:
    hold = HoldCoordinatorLoad()
    with run_broker(log_dir, overrides=OVERRIDES, fault_hooks=hold, load_services_after_ready=True) as b:
        try:
            assert hold.reached.wait(60), "the coordinators never started loading"
            join_warm_up_threads()  # its metrics registry, then requests are counted
            b.state.metrics.start()
            yield b, hold
        finally:
            hold.release.set()


def _wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _answered(b: BrokerHandle, api: str, error: int) -> float:
    return b.state.metrics.sample("tidelog_requests_total", {"api": api, "error_code": str(error)}) or 0.0


def _join(wire: KafkaWire) -> Any:
    jg = request_class(11)[5]
    return wire.request(11, 5, jg(group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                  member_id="", group_instance_id=None, protocol_type="consumer",
                                  protocols=[jg.JoinGroupRequestProtocol(name="range", metadata=b"")]))


def _offset_fetch(wire: KafkaWire) -> Any:
    of = request_class(9)[5]
    return wire.request(9, 5, of(group_id=GROUP, topics=[of.OffsetFetchRequestTopic(name=TOPIC,
                                                                                     partition_indexes=[0])]))


def _init_producer_id(wire: KafkaWire, transactional_id: str | None) -> Any:
    return wire.request(22, 4, request_class(22)[4](transactional_id=transactional_id, transaction_timeout_ms=60000,
                                                    producer_id=-1, producer_epoch=-1))


@pytest.mark.slow
def test_coordinator_apis_answer_load_in_progress_until_loaded(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    _seed(tmp_path)
    with _loading_broker(tmp_path) as (b, hold), KafkaWire(b.bootstrap) as wire:
        assert not b.state.services.loaded
        # Metadata, and the idempotent producer's InitProducerId, need no coordinator
        md = wire.request(3, 1, request_class(3)[1](topics=None))
        assert {t.name for t in md.topics if t.error_code == 0} >= {TOPIC}
        assert _init_producer_id(wire, None).error_code == 0
        # FindCoordinator names this broker (the topics exist); the coordinator APIs answer that they are loading
        find = wire.request(10, 1, request_class(10)[1](key=GROUP, key_type=0))
        assert (find.error_code, find.node_id) == (0, b.state.node_id)
        assert _join(wire).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        hb = request_class(12)[3](group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None)
        assert wire.request(12, 3, hb).error_code == 0  # GroupCoordinatorService.heartbeat: NONE while loading
        assert _offset_fetch(wire).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        lg = wire.request(16, 3, request_class(16)[3]())
        assert (lg.error_code, lg.groups) == (E.COORDINATOR_LOAD_IN_PROGRESS, [])
        [described] = wire.request(15, 3, request_class(15)[3](groups=[GROUP],
                                                               include_authorized_operations=False)).groups
        assert described.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        assert _init_producer_id(wire, TXN_ID).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        sg = request_class(14)[3](group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None,
                                  assignments=[])
        assert wire.request(14, 3, sg).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        oc = request_class(8)[5]
        T = oc.OffsetCommitRequestTopic
        commit = oc(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[T(
            name=TOPIC, partitions=[T.OffsetCommitRequestPartition(partition_index=0, committed_offset=4,
                                                                   committed_metadata="")])])
        assert wire.request(8, 5, commit).topics[0].partitions[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        end = request_class(26)[3](transactional_id=TXN_ID, producer_id=1, producer_epoch=0, committed=True)
        assert wire.request(26, 3, end).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        # Produce (non-transactional) is served while the coordinators load
        producer = KafkaProducer(bootstrap_servers=b.bootstrap)
        try:
            assert producer.send(TOPIC, value=b"during-load", partition=0).get(60).offset == 6  # 5 records + the commit marker
        finally:
            producer.close(10)
        assert _answered(b, "join_group", E.COORDINATOR_LOAD_IN_PROGRESS) == 1

        hold.release.set()
        _wait_until(lambda: b.state.services.loaded, "the coordinators to load")
        # the replayed state is served: the first run's committed offset and transactional id
        fetched = _offset_fetch(wire)
        assert fetched.error_code == 0
        assert fetched.topics[0].partitions[0].committed_offset == SEEDED_OFFSET
        assert _join(wire).error_code == E.MEMBER_ID_REQUIRED  # KIP-394: the ordinary first answer
        assert _init_producer_id(wire, TXN_ID).error_code == 0


@pytest.mark.slow
def test_clients_retry_through_coordinator_load(tmp_path: Path) -> None:
    """A kafka-python consumer group and transactional producer started while the coordinators load are answered
    COORDINATOR_LOAD_IN_PROGRESS, keep retrying, and complete once the load is done: the consumer resumes at the
    offset committed before the restart, the producer gets its transactional id's next epoch."""
    from kafka import KafkaConsumer, KafkaProducer

    seeded_epoch = _seed(tmp_path)
    with _loading_broker(tmp_path) as (b, hold):
        consumed: list[int] = []
        results: dict[str, Any] = {}

        def consume() -> None:
            consumer = KafkaConsumer(TOPIC, bootstrap_servers=b.bootstrap, group_id=GROUP, enable_auto_commit=False,
                                     auto_offset_reset="earliest", retry_backoff_ms=50)
            try:
                deadline = time.monotonic() + 90
                while len(consumed) < 5 - SEEDED_OFFSET and time.monotonic() < deadline:
                    for records in consumer.poll(timeout_ms=200).values():
                        consumed.extend(r.offset for r in records)
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                results["consumer"] = exc
            finally:
                consumer.close()

        def produce() -> None:
            producer = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=TXN_ID, retry_backoff_ms=50)
            try:
                producer.init_transactions()
                producer.begin_transaction()
                producer.send(TOPIC, value=b"after-load", partition=0)
                producer.commit_transaction()
                results["committed"] = True
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                results["producer"] = exc
            finally:
                producer.close(10)

        threads = [threading.Thread(target=consume), threading.Thread(target=produce)]
        try:
            for t in threads:
                t.start()
            # both clients are told to come back, more than once, while the load is held
            _wait_until(lambda: _answered(b, "join_group", E.COORDINATOR_LOAD_IN_PROGRESS) >= 2
                        and _answered(b, "init_producer_id", E.COORDINATOR_LOAD_IN_PROGRESS) >= 2,
                        "the clients to be answered COORDINATOR_LOAD_IN_PROGRESS")
            assert consumed == [] and not results
        finally:
            hold.release.set()
            for t in threads:
                t.join(120)
        assert "consumer" not in results and "producer" not in results, results
        assert consumed[:3] == [SEEDED_OFFSET, SEEDED_OFFSET + 1, SEEDED_OFFSET + 2]
        assert results.get("committed") and _txn_epoch(b) == seeded_epoch + 1
