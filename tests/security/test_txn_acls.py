"""Authorization of the transaction APIs as Kafka's KafkaApis does it (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions) and the authorized operations that
Metadata, DescribeCluster and DescribeGroups report (KIP-430): a confluent-kafka transactional producer denied and
then allowed, the exact per-partition codes on the wire, kafka-python's admin client for the operations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import KafkaWire, SecureBrokerHandle, run_secure_broker

USERS = {"alice": "alice-secret", "admin": "admin-secret"}
ALICE = "User:alice"


@pytest.fixture(scope="module")
def broker() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(users=USERS, authorizer=True, super_users=["User:admin"], overrides={
            "transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2}) as handle:
        yield handle


def admin(b: SecureBrokerHandle) -> AdminClient:
    return AdminClient(b.confluent_config("SASL_PLAINTEXT", "PLAIN", user="admin"))


def allow(rtype: ResourceType, name: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, ALICE, "*", op, AclPermissionType.ALLOW)


def create_acls(b: SecureBrokerHandle, *acls: AclBinding) -> None:
    client = admin(b)  # a handle must outlive its futures
    for fut in client.create_acls(list(acls), request_timeout=30).values():
        fut.result(30)


def create_topics(b: SecureBrokerHandle, *names: str, partitions: int = 1) -> None:
    client = admin(b)
    for fut in client.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        fut.result(30)


def wire(b: SecureBrokerHandle, user: str = "alice") -> KafkaWire:
    """A raw connection authenticated with SASL/PLAIN over SASL_PLAINTEXT."""
    w = KafkaWire(b.listeners["SASL_PLAINTEXT"])
    assert w.request(17, 1, request_class(17)[1](mechanism="PLAIN")).error_code == 0
    auth = f"\0{user}\0{USERS[user]}".encode()
    assert w.request(36, 2, request_class(36)[2](auth_bytes=auth)).error_code == 0
    return w


def init(w: KafkaWire, tid: str) -> Any:
    resp = w.request(22, 4, request_class(22)[4](transactional_id=tid, transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1))
    assert resp.error_code == 0
    return resp


def add_partitions(w: KafkaWire, tid: str, pid: int, epoch: int,
                   topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    Req = request_class(24)[3]
    resp = w.request(24, 3, Req(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[Req.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets(w: KafkaWire, tid: str, pid: int, epoch: int, group: str) -> int:
    return int(w.request(25, 3, request_class(25)[3](
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)).error_code)


def end_txn(w: KafkaWire, tid: str, pid: int, epoch: int, commit: bool) -> int:
    return int(w.request(26, 3, request_class(26)[3](
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code)


def txn_offset_commit(w: KafkaWire, tid: str, pid: int, epoch: int, group: str,
                      offsets: dict[str, int]) -> dict[str, int]:
    Req = request_class(28)[3]
    T = Req.TxnOffsetCommitRequestTopic
    resp = w.request(28, 3, Req(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=-1,
        member_id="", group_instance_id=None, topics=[T(name=t, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=o, committed_leader_epoch=-1, committed_metadata="")])
            for t, o in offsets.items()]))
    return {t.name: t.partitions[0].error_code for t in resp.topics}


def committed(w: KafkaWire, group: str, topic: str) -> int:
    F = request_class(9)[7]
    out = w.request(9, 7, F(group_id=group, require_stable=True, topics=[
        F.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    p = out.topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.committed_offset)


def test_transactional_producer_needs_its_acls(broker: SecureBrokerHandle) -> None:
    """confluent-kafka: InitProducerId, AddPartitionsToTxn and AddOffsetsToTxn each denied until alice has WRITE
    on the transactional id, WRITE on the output topic and READ on the group; then the transaction commits."""
    create_topics(broker, "ctx-out", "ctx-in")
    conf = {**broker.confluent_config("SASL_PLAINTEXT", "PLAIN", user="alice"), "transactional.id": "ctx-alice",
            "message.timeout.ms": 20000}

    def code(exc: pytest.ExceptionInfo[KafkaException]) -> int:
        return int(exc.value.args[0].code())

    with pytest.raises(KafkaException) as denied:
        Producer(conf).init_transactions(30)
    assert code(denied) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    create_acls(broker, allow(ResourceType.TRANSACTIONAL_ID, "ctx-alice", AclOperation.WRITE),
                allow(ResourceType.TOPIC, "ctx-out", AclOperation.DESCRIBE))
    producer = Producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("ctx-out", b"never")
    with pytest.raises(KafkaException) as denied:
        producer.commit_transaction(30)
    assert code(denied) == E.TOPIC_AUTHORIZATION_FAILED
    assert "add partition" in str(denied.value)  # refused by AddPartitionsToTxn, before any Produce
    assert denied.value.args[0].txn_requires_abort()
    # (librdkafka's abort would now send EndTxn for a transaction with no partition: INVALID_TXN_STATE, fatal,
    # as against Kafka; a new producer takes over the id instead)

    # DESCRIBE on the group lets FindCoordinator through: what refuses the offsets is AddOffsetsToTxn's READ
    create_acls(broker, allow(ResourceType.TOPIC, "ctx-out", AclOperation.WRITE),
                allow(ResourceType.GROUP, "ctx-group", AclOperation.DESCRIBE))
    producer = Producer(conf)
    producer.init_transactions(30)
    consumer = Consumer({**broker.confluent_config("SASL_PLAINTEXT", "PLAIN", user="alice"),
                         "group.id": "ctx-group"})
    try:
        group = consumer.consumer_group_metadata()
        producer.begin_transaction()
        producer.produce("ctx-out", b"aborted")
        assert producer.flush(30) == 0
        with pytest.raises(KafkaException) as denied:
            producer.send_offsets_to_transaction([CKTopicPartition("ctx-in", 0, 5)], group, 30)
        assert code(denied) == E.GROUP_AUTHORIZATION_FAILED
        assert "add offsets to transaction" in str(denied.value)  # AddOffsetsToTxn
        producer.abort_transaction(30)

        create_acls(broker, allow(ResourceType.GROUP, "ctx-group", AclOperation.READ))
        producer.begin_transaction()
        producer.produce("ctx-out", b"aborted too")
        assert producer.flush(30) == 0
        with pytest.raises(KafkaException) as denied:  # TxnOffsetCommit: no READ on the input topic
            producer.send_offsets_to_transaction([CKTopicPartition("ctx-in", 0, 5)], group, 30)
        assert code(denied) == E.TOPIC_AUTHORIZATION_FAILED
        assert "commit offsets to transaction" in str(denied.value)  # TxnOffsetCommit, per partition
        producer.abort_transaction(30)

        create_acls(broker, allow(ResourceType.TOPIC, "ctx-in", AclOperation.READ))
        producer.begin_transaction()
        producer.produce("ctx-out", b"committed")
        producer.send_offsets_to_transaction([CKTopicPartition("ctx-in", 0, 5)], group, 30)
        producer.commit_transaction(30)
    finally:
        consumer.close()
    with wire(broker, "admin") as w:
        assert committed(w, "ctx-group", "ctx-in") == 5
    reader = Consumer({**broker.confluent_config("SASL_PLAINTEXT", "PLAIN", user="admin"),
                       "group.id": "ctx-reader", "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        reader.assign([CKTopicPartition("ctx-out", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = reader.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                break  # partition EOF
            got.append(msg.value())
        assert got == [b"committed"]
    finally:
        reader.close()


def test_add_partitions_to_txn_codes(broker: SecureBrokerHandle) -> None:
    create_topics(broker, "apt-w", "apt-d", partitions=2)
    with wire(broker) as w:
        assert add_partitions(w, "apt-tx", 1, 0, {"apt-w": [0, 1]}) == dict.fromkeys(
            [("apt-w", 0), ("apt-w", 1)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        create_acls(broker, allow(ResourceType.TRANSACTIONAL_ID, "apt-tx", AclOperation.WRITE),
                    allow(ResourceType.TOPIC, "apt-w", AclOperation.WRITE, ResourcePatternType.PREFIXED),
                    allow(ResourceType.TOPIC, "__consumer_offsets", AclOperation.WRITE))
        r = init(w, "apt-tx")
        pid, epoch = r.producer_id, r.producer_epoch
        # no WRITE beats unknown (KafkaApis checks authorization first); the authorized rest is not attempted;
        # an internal topic is never authorized here, whatever the ACLs
        assert add_partitions(w, "apt-tx", pid, epoch, {
            "apt-w": [0, 9], "apt-d": [0], "apt-wgone": [0], "apt-nope": [0], "__consumer_offsets": [0],
        }) == {("apt-w", 0): E.OPERATION_NOT_ATTEMPTED, ("apt-w", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
               ("apt-d", 0): E.TOPIC_AUTHORIZATION_FAILED, ("apt-wgone", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
               ("apt-nope", 0): E.TOPIC_AUTHORIZATION_FAILED, ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED}
        assert add_partitions(w, "apt-tx", pid, epoch, {"apt-w": [0, 1], "apt-d": [1]}) == {
            ("apt-w", 0): E.OPERATION_NOT_ATTEMPTED, ("apt-w", 1): E.OPERATION_NOT_ATTEMPTED,
            ("apt-d", 1): E.TOPIC_AUTHORIZATION_FAILED}
        assert add_partitions(w, "apt-tx", pid, epoch, {"apt-w": [0, 1]}) == {("apt-w", 0): 0, ("apt-w", 1): 0}
        assert end_txn(w, "apt-tx", pid, epoch, False) == E.NONE


def test_add_offsets_end_txn_and_txn_offset_commit_codes(broker: SecureBrokerHandle) -> None:
    create_topics(broker, "off-r", "off-x")
    offsets = {"off-r": 42, "off-x": 7}
    with wire(broker) as w:
        assert add_offsets(w, "off-tx", 1, 0, "off-group") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert end_txn(w, "off-tx", 1, 0, True) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert txn_offset_commit(w, "off-tx", 1, 0, "off-group", offsets) == dict.fromkeys(
            offsets, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        create_acls(broker, allow(ResourceType.TRANSACTIONAL_ID, "off-tx", AclOperation.WRITE))
        r = init(w, "off-tx")
        pid, epoch = r.producer_id, r.producer_epoch
        assert end_txn(w, "off-tx", pid + 1000, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING  # past the ACL
        assert add_offsets(w, "off-tx", pid, epoch, "off-group") == E.GROUP_AUTHORIZATION_FAILED
        assert txn_offset_commit(w, "off-tx", pid, epoch, "off-group", offsets) == dict.fromkeys(
            offsets, E.GROUP_AUTHORIZATION_FAILED)
        create_acls(broker, allow(ResourceType.GROUP, "off-group", AclOperation.READ),
                    allow(ResourceType.TOPIC, "off-r", AclOperation.READ))
        assert add_offsets(w, "off-tx", pid, epoch, "off-group") == E.NONE
        # per topic READ: the unreadable topic fails, the readable one is still committed (KafkaApis)
        assert txn_offset_commit(w, "off-tx", pid, epoch, "off-group", offsets) == {
            "off-r": E.NONE, "off-x": E.TOPIC_AUTHORIZATION_FAILED}
        assert end_txn(w, "off-tx", pid, epoch, True) == E.NONE
    with wire(broker, "admin") as w:
        assert (committed(w, "off-group", "off-r"), committed(w, "off-group", "off-x")) == (42, -1)


def test_describe_producers_transactions_and_list_filtered(broker: SecureBrokerHandle) -> None:
    create_topics(broker, "dsc-a", "dsc-b")
    D = request_class(61)[0]
    producers_req = D(topics=[D.TopicRequest(name=t, partition_indexes=[0]) for t in ("dsc-a", "dsc-b")])
    L = request_class(66)[0](state_filters=["Ongoing"], producer_id_filters=[])
    with wire(broker, "admin") as adm, wire(broker) as w:
        r = init(adm, "dsc-tx")
        assert add_partitions(adm, "dsc-tx", r.producer_id, r.producer_epoch, {"dsc-a": [0], "dsc-b": [0]}) == {
            ("dsc-a", 0): 0, ("dsc-b", 0): 0}

        def producers_errors() -> list[tuple[int, str | None]]:
            resp = w.request(61, 0, producers_req)
            return [(t.partitions[0].error_code, t.partitions[0].error_message) for t in resp.topics]

        def describe(conn: KafkaWire) -> tuple[int, list[str]]:
            (state,) = conn.request(65, 0, request_class(65)[0](transactional_ids=["dsc-tx"])).transaction_states
            return int(state.error_code), [t.topic for t in state.topics]

        def listed(conn: KafkaWire) -> set[str]:
            return {t.transactional_id for t in conn.request(66, 0, L).transaction_states}

        assert producers_errors() == [(E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")] * 2
        assert describe(w) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])
        assert "dsc-tx" not in listed(w)
        assert "dsc-tx" in listed(adm)
        create_acls(broker, allow(ResourceType.TOPIC, "dsc-a", AclOperation.READ),
                    allow(ResourceType.TRANSACTIONAL_ID, "dsc-tx", AclOperation.DESCRIBE))
        assert producers_errors() == [(E.NONE, None), (E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")]
        assert describe(w) == (E.NONE, ["dsc-a"])  # only the topics alice may describe
        assert describe(adm) == (E.NONE, ["dsc-a", "dsc-b"])
        assert "dsc-tx" in listed(w)
        assert end_txn(adm, "dsc-tx", r.producer_id, r.producer_epoch, False) == E.NONE


def test_authorized_operations_follow_the_acls(broker: SecureBrokerHandle) -> None:
    from kafka import KafkaAdminClient

    create_topics(broker, "ops-t")
    Commit = request_class(8)[2]
    T = Commit.OffsetCommitRequestTopic
    with wire(broker, "admin") as w:  # a group to describe (a simple offset commit creates it, Empty)
        resp = w.request(8, 2, Commit(
            group_id="ops-g", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
            topics=[T(name="ops-t", partitions=[T.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=0, committed_metadata="")])]))
        assert resp.topics[0].partitions[0].error_code == 0
    create_acls(broker, allow(ResourceType.TOPIC, "ops-t", AclOperation.READ),
                allow(ResourceType.TOPIC, "ops-t", AclOperation.DESCRIBE_CONFIGS),
                allow(ResourceType.GROUP, "ops-g", AclOperation.DESCRIBE))

    def client(user: str) -> Any:
        return KafkaAdminClient(**broker.kafka_python_config("SASL_PLAINTEXT", "PLAIN", user=user))

    alice, root = client("alice"), client("admin")
    try:
        (topic,) = alice.describe_topics(["ops-t"])
        assert set(topic["authorized_operations"]) == {"READ", "DESCRIBE", "DESCRIBE_CONFIGS"}  # READ => DESCRIBE
        (topic,) = root.describe_topics(["ops-t"])
        assert set(topic["authorized_operations"]) == {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                                                       "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
        assert alice.describe_cluster()["authorized_operations"] == []  # no DESCRIBE on the cluster: 0
        assert set(root.describe_cluster()["authorized_operations"]) == {
            "CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
        group = alice.describe_groups(["ops-g"])
        assert set(group["ops-g"]["authorized_operations"]) == {"DESCRIBE"}
        assert set(root.describe_groups(["ops-g"])["ops-g"]["authorized_operations"]) == {
            "READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
        create_acls(broker, allow(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
                    allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE))
        assert set(alice.describe_cluster()["authorized_operations"]) == {"IDEMPOTENT_WRITE", "DESCRIBE"}
    finally:
        alice.close()
        root.close()
    with wire(broker) as w:  # Metadata v8-10 carries the cluster's operations too
        M = request_class(3)[10]
        resp = w.request(3, 10, M(topics=[M.MetadataRequestTopic(topic_id=None, name="ops-t")],
                                  allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                                  include_topic_authorized_operations=True))
        assert resp.authorized_operations == {12, 8}  # IDEMPOTENT_WRITE, DESCRIBE
        assert resp.topics[0].authorized_operations == {3, 8, 10}  # READ, DESCRIBE, DESCRIBE_CONFIGS
        R = request_class(75)[0]
        resp = w.request(75, 0, R(topics=[R.TopicRequest(name="ops-t")], response_partition_limit=10, cursor=None))
        assert resp.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8) | (1 << 10)
