"""FaultInjector on the wire: which requests an injected error answers, where the error sits in each API's
response, that a faulted write is not applied, latency, clearing, and input validation."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest

from tests.broker.broker_testlib import LIST_OFFSETS, METADATA, PRODUCE, batch, produce, produce_request
from tidelog.broker.faults import FaultInjector
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, OFFSET_COMMIT = 10, 11, 12, 8


pytestmark = pytest.mark.tidelog(topics={"a": 2, "b": 1})


@pytest.fixture
def client(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    tidelog_module_broker.clear_faults()
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="fault-test", timeout=120) as c:
        yield c
    tidelog_module_broker.clear_faults()


def test_produce_errors_are_answered_in_order_and_not_applied(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    before = len(tidelog_module_broker.records("a", 0))
    tidelog_module_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", int(ErrorCode.KAFKA_STORAGE_ERROR)])
    assert produce(client, "a", batch()).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert produce(client, "a", batch()).error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(tidelog_module_broker.records("a", 0)) == before  # neither faulted batch was written
    assert tidelog_module_broker.faults.pending_errors("Produce") == 0 and not tidelog_module_broker.faults.armed
    ok = produce(client, "a", batch(value=b"applied"))
    assert ok.error_code == 0
    assert [r.value for r in tidelog_module_broker.records("a", 0)][-1] == b"applied0"


def test_topic_limited_error_hits_only_that_topics_partitions(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    a_before, b_before = len(tidelog_module_broker.records("a")), len(tidelog_module_broker.records("b"))
    tidelog_module_broker.inject_errors("Produce", ["LEADER_NOT_AVAILABLE"], topic="b")
    cls = request_class(PRODUCE)[9]
    T, P = cls.TopicProduceData, cls.TopicProduceData.PartitionProduceData
    request = cls(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        T(name="a", partition_data=[P(index=0, records=batch()), P(index=1, records=batch())]),
        T(name="b", partition_data=[P(index=0, records=batch())])])
    response = client.request(PRODUCE, 9, request)
    errors = {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}
    assert errors == {("a", 0): 0, ("a", 1): 0, ("b", 0): ErrorCode.LEADER_NOT_AVAILABLE}
    assert len(tidelog_module_broker.records("a")) == a_before + 2 and len(tidelog_module_broker.records("b")) == b_before
    # A request that does not name the topic leaves a pending topic-limited error alone.
    tidelog_module_broker.inject_errors("Produce", ["LEADER_NOT_AVAILABLE"], topic="b")
    assert produce(client, "a", batch()).error_code == 0
    assert tidelog_module_broker.faults.pending_errors("Produce") == 1
    assert produce(client, "b", batch()).error_code == ErrorCode.LEADER_NOT_AVAILABLE


def test_topic_limited_error_finds_a_produce_13_topic_by_its_id(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    """Produce v13 names topics by id (KIP-516): the injector resolves it to match `topic`."""
    import uuid

    def tid(name: str) -> uuid.UUID:
        info = tidelog_module_broker.state.topics.get(name)
        assert info is not None
        return uuid.UUID(bytes=bytes(info.topic_id))

    a_before, b_before = len(tidelog_module_broker.records("a")), len(tidelog_module_broker.records("b"))
    tidelog_module_broker.inject_errors("Produce", ["LEADER_NOT_AVAILABLE"], topic="b")
    cls = request_class(PRODUCE)[13]
    T, P = cls.TopicProduceData, cls.TopicProduceData.PartitionProduceData
    request = cls(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        T(topic_id=tid("a"), partition_data=[P(index=0, records=batch())]),
        T(topic_id=tid("b"), partition_data=[P(index=0, records=batch())])])
    response = client.request(PRODUCE, 13, request)
    errors = {(t.topic_id, p.index): p.error_code for t in response.responses for p in t.partition_responses}
    assert errors == {(tid("a"), 0): 0, (tid("b"), 0): ErrorCode.LEADER_NOT_AVAILABLE}
    assert len(tidelog_module_broker.records("a")) == a_before + 1 and len(tidelog_module_broker.records("b")) == b_before


def test_acks_zero_produce_with_injected_error_closes_the_connection(tidelog_module_broker: BrokerHandle,
                                                                     client: KafkaWire) -> None:
    tidelog_module_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
    client.send(PRODUCE, 9, produce_request("a", 0, batch(), acks=0))
    assert client.is_closed()  # Kafka closes an acks=0 producer's connection on an error


def test_read_only_partition_apis_get_the_error_per_partition(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.inject_errors("ListOffsets", ["UNKNOWN_LEADER_EPOCH"], topic="a")
    cls = request_class(LIST_OFFSETS)[7]
    T, P = cls.ListOffsetsTopic, cls.ListOffsetsTopic.ListOffsetsPartition
    request = cls(replica_id=-1, isolation_level=0, topics=[
        T(name="a", partitions=[P(partition_index=0, current_leader_epoch=-1, timestamp=-1)]),
        T(name="b", partitions=[P(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    response = client.request(LIST_OFFSETS, 7, request)
    by_topic = {t.name: t.partitions[0] for t in response.topics}
    assert by_topic["a"].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert by_topic["b"].error_code == 0 and by_topic["b"].offset == len(tidelog_module_broker.records("b"))


@pytest.mark.parametrize("version", [12, 13])  # by name, then by topic id (KIP-516)
def test_fetch_error_on_one_topic_leaves_the_others_data(tidelog_module_broker: BrokerHandle, client: KafkaWire,
                                                        version: int) -> None:
    from tests.broker.broker_testlib import FETCH, topic_id

    produce(client, "a", batch())
    produce(client, "b", batch(value=b"data"))
    ids = {name: topic_id(client, name) for name in ("a", "b")}
    cls = request_class(FETCH)[version]
    T = cls.FetchTopic

    def fetch_topic(name: str) -> object:
        key = {"topic_id": ids[name]} if version >= 13 else {"topic": name}
        return T(**key, partitions=[T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                     last_fetched_epoch=-1, log_start_offset=-1,
                                                     partition_max_bytes=1 << 20)])

    request = cls(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                  session_epoch=-1, topics=[fetch_topic("a"), fetch_topic("b")], forgotten_topics_data=[],
                  rack_id="")
    tidelog_module_broker.inject_errors("Fetch", ["NOT_LEADER_OR_FOLLOWER"], topic="a")
    response = client.request(FETCH, version, request)
    key = (lambda t: t.topic_id) if version >= 13 else (lambda t: t.topic)
    by_topic = {key(t): t.partitions for t in response.responses}
    [a] = by_topic[ids["a"] if version >= 13 else "a"]
    [b] = by_topic[ids["b"] if version >= 13 else "b"]
    assert a.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not a.records
    assert b.error_code == 0 and b.records
    tidelog_module_broker.inject_errors("Fetch", ["UNKNOWN_LEADER_EPOCH"])  # every topic: the handler is not called
    response = client.request(FETCH, version, request)
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.UNKNOWN_LEADER_EPOCH] * 2
    assert response.session_id == 0


def test_group_apis_get_the_top_level_error(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.inject_errors("FindCoordinator", ["COORDINATOR_NOT_AVAILABLE"])
    tidelog_module_broker.inject_errors("Heartbeat", ["REBALANCE_IN_PROGRESS"])
    cls = request_class(FIND_COORDINATOR)[4]
    response = client.request(FIND_COORDINATOR, 4, cls(key_type=0, coordinator_keys=["g1", "g2"]))
    assert [(c.key, c.error_code) for c in response.coordinators] == [
        ("g1", ErrorCode.COORDINATOR_NOT_AVAILABLE), ("g2", ErrorCode.COORDINATOR_NOT_AVAILABLE)]
    response = client.request(FIND_COORDINATOR, 4, cls(key_type=0, coordinator_keys=["g1"]))
    assert response.coordinators[0].error_code == 0  # one error was injected: the next request is served
    hb = request_class(HEARTBEAT)[4](group_id="g1", generation_id=1, member_id="m", group_instance_id=None)
    assert client.request(HEARTBEAT, 4, hb).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_offset_commit_error_is_per_partition_and_not_stored(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.inject_errors("OffsetCommit", ["COORDINATOR_LOAD_IN_PROGRESS"])
    cls = request_class(OFFSET_COMMIT)[8]
    T = cls.OffsetCommitRequestTopic
    request = cls(group_id="standalone", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                  topics=[T(name="a", partitions=[T.OffsetCommitRequestPartition(
                      partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="")])])
    response = client.request(OFFSET_COMMIT, 8, request)
    assert response.topics[0].partitions[0].error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert tidelog_module_broker.committed_offsets("standalone") == {}
    response = client.request(OFFSET_COMMIT, 8, request)
    assert response.topics[0].partitions[0].error_code == 0
    assert tidelog_module_broker.committed_offsets("standalone") == {("a", 0): 5}


def test_metadata_error_per_topic(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.inject_errors("Metadata", ["LEADER_NOT_AVAILABLE"], topic="a")
    cls = request_class(METADATA)[12]
    request = cls(topics=[cls.MetadataRequestTopic(topic_id=None, name="a"),
                          cls.MetadataRequestTopic(topic_id=None, name="b")],
                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    response = client.request(METADATA, 12, request)
    assert {t.name: t.error_code for t in response.topics} == {"a": ErrorCode.LEADER_NOT_AVAILABLE, "b": 0}


def test_latency_delays_only_the_chosen_api(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.set_latency(300, "Produce")
    started = time.monotonic()
    assert produce(client, "a", batch()).error_code == 0
    assert time.monotonic() - started >= 0.3  # a lower bound: load can only add to it
    assert tidelog_module_broker.faults._latency_ms == {PRODUCE: 300}  # Metadata etc. stay undelayed
    tidelog_module_broker.clear_faults()
    assert not tidelog_module_broker.faults.armed


def test_join_group_error_reaches_a_real_consumer_once(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaConsumer

    tidelog_module_broker.inject_errors("JoinGroup", ["COORDINATOR_NOT_AVAILABLE"])
    consumer = KafkaConsumer("a", bootstrap_servers=tidelog_module_broker.bootstrap, group_id="joiners",
                             auto_offset_reset="earliest", request_timeout_ms=30_000)
    try:
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        assert consumer.assignment()  # retried after the injected error and joined
        assert tidelog_module_broker.faults.pending_errors("JoinGroup") == 0
    finally:
        consumer.close()


def test_pause_refuses_connections_and_resume_keeps_state(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=30) as c:
        produce(c, "b", batch(value=b"kept"))
        before = tidelog_module_broker.records("b")
        tidelog_module_broker.pause()
        assert c.is_closed()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((tidelog_module_broker.host, tidelog_module_broker.port), timeout=5).close()
        tidelog_module_broker.resume()
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=30) as c:
        assert produce(c, "b", batch()).error_code == 0
    assert tidelog_module_broker.records("b")[: len(before)] == before


def test_drop_connections_counts_and_closes(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=30) as c1, KafkaWire(tidelog_module_broker.bootstrap, timeout=30) as c2:
        produce(c1, "a", batch())
        produce(c2, "a", batch())
        assert tidelog_module_broker.drop_connections() == 2
        assert c1.is_closed() and c2.is_closed()
    with KafkaWire(tidelog_module_broker.bootstrap, timeout=30) as c:
        assert produce(c, "a", batch()).error_code == 0


def test_restart_keeps_port_log_dir_and_records(tmp_path: object,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    b = tidelog_broker_factory(topics={"r": 1})
    with KafkaWire(b.bootstrap, timeout=30) as c:
        produce(c, "r", batch(3))
    port, log_dir, before = b.port, b.log_dir, b.records("r")
    b.restart()
    assert (b.port, b.log_dir) == (port, log_dir)
    assert b.records("r") == before and len(before) == 3
    with KafkaWire(b.bootstrap, timeout=30) as c:
        assert produce(c, "r", batch()).base_offset == 3


def test_error_names_beyond_the_brokers_own_are_kafkas(tidelog_module_broker: BrokerHandle, client: KafkaWire) -> None:
    tidelog_module_broker.inject_errors("Produce", ["NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NETWORK_EXCEPTION"])
    assert produce(client, "a", batch()).error_code == 20
    assert produce(client, "a", batch()).error_code == 13


@pytest.mark.parametrize(("call", "message"), [
    (lambda f: f.inject_errors("Produc", ["NONE"]), "unknown API"),
    (lambda f: f.inject_errors("Produce", ["NOT_A_KAFKA_ERROR"]), "unknown Kafka error"),
    (lambda f: f.inject_errors("Produce", [0]), "not an error"),
    (lambda f: f.inject_errors("JoinGroup", ["NOT_COORDINATOR"], topic="a"), "topic= applies"),
    (lambda f: f.inject_errors("ApiVersions", ["UNKNOWN_SERVER_ERROR"]), "ApiVersions"),
    (lambda f: f.set_latency(-1), "latency"),
])
def test_bad_fault_arguments_are_rejected(call: object, message: str) -> None:
    faults = FaultInjector()
    with pytest.raises(ValueError, match=message):
        call(faults)  # type: ignore[operator]
    assert not faults.armed
