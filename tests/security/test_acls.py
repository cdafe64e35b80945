"""ACLs with StandardAuthorizer semantics through real admin clients, each API family denied without its ACL
and allowed with it, and SCRAM users managed with AlterUserScramCredentials / DescribeUserScramCredentials."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from tidelog.protocol.messages import request_class
from tidelog.testing import KafkaWire, SecureBrokerHandle, run_secure_broker

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture(scope="module")
def acl_broker() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(users=USERS, authorizer=True, super_users=["User:admin"]) as handle:
        yield handle


def admin(b: SecureBrokerHandle, user: str = "admin", mech: str = "SCRAM-SHA-512") -> AdminClient:
    return AdminClient(b.confluent_config("SASL_PLAINTEXT", mech, user=user))


def allow(principal: str, rtype: ResourceType, name: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def alice_wire(b: SecureBrokerHandle) -> KafkaWire:
    """A raw connection authenticated as alice (SASL/PLAIN over SASL_PLAINTEXT)."""
    wire = KafkaWire(b.listeners["SASL_PLAINTEXT"])
    assert wire.request(17, 1, request_class(17)[1](mechanism="PLAIN")).error_code == 0
    assert wire.request(36, 2, request_class(36)[2](auth_bytes=b"\0alice\0alice-secret")).error_code == 0
    return wire


def create_acls(b: SecureBrokerHandle, acls: list[AclBinding]) -> None:
    client = admin(b)  # a handle must outlive its futures
    for fut in client.create_acls(acls, request_timeout=30).values():
        fut.result(30)


def create_topic(b: SecureBrokerHandle, name: str) -> None:
    client = admin(b)
    client.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def test_acl_admin_round_trip(acl_broker: SecureBrokerHandle) -> None:
    a = admin(acl_broker)
    bindings = [allow("User:bob", ResourceType.TOPIC, "rt-orders", AclOperation.READ),
                allow("User:bob", ResourceType.TOPIC, "rt-", AclOperation.WRITE, ResourcePatternType.PREFIXED),
                allow("User:bob", ResourceType.GROUP, "rt-group", AclOperation.READ),
                AclBinding(ResourceType.TOPIC, "rt-orders", ResourcePatternType.LITERAL, "User:bob", "10.0.0.1",
                           AclOperation.DELETE, AclPermissionType.DENY)]
    create_acls(acl_broker, bindings)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert set(a.describe_acls(everything, request_timeout=30).result(30)) == set(bindings)
    match = AclBindingFilter(ResourceType.TOPIC, "rt-orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert set(a.describe_acls(match).result(30)) == {bindings[0], bindings[1], bindings[3]}
    # alice is not a super user and has no DESCRIBE on the cluster
    # alice is not a super user and has no DESCRIBE on the cluster (librdkafka drops DescribeAcls' error code,
    # so this is checked on the wire)
    with alice_wire(acl_broker) as wire:
        denied = wire.request(29, 2, request_class(29)[2](
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert (denied.error_code, denied.resources) == (CKError.CLUSTER_AUTHORIZATION_FAILED, [])
    deny_only = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                 AclPermissionType.DENY)
    deleted = a.delete_acls([deny_only], request_timeout=30)[deny_only].result(30)
    assert deleted == [bindings[3]]
    deleted = a.delete_acls([everything])[everything].result(30)
    assert set(deleted) == set(bindings[:3])
    assert a.describe_acls(everything).result(30) == []
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:x", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException):
        a.create_acls([bad])[bad].result(30)


def test_scram_users_through_admin(acl_broker: SecureBrokerHandle) -> None:
    a = admin(acl_broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    a.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-pw")]  # random salt
                                   )["carol"].result(30)
    described = a.describe_user_scram_credentials(["carol"])["carol"].result(30)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]

    def can_login(password: str, timeout_ms: int = 10_000) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError as KafkaPythonError

        conf = acl_broker.kafka_python_config("SASL_PLAINTEXT", "SCRAM-SHA-256", user="alice")
        conf.update(sasl_plain_username="carol", sasl_plain_password=password)
        try:
            # kafka-python retries a refused login until its bootstrap timeout (30 s by default): the refusals
            # below wait 3 s, as long as a login here takes many times over
            KafkaAdminClient(request_timeout_ms=10_000, bootstrap_timeout_ms=timeout_ms, **conf).close()
            return True
        except KafkaPythonError:
            return False

    assert can_login("carol-pw")
    assert not can_login("wrong", 3_000)
    a.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
                                   )["carol"].result(30)
    assert not can_login("carol-pw", 3_000)
    # alice may not describe users. Checked on the wire: librdkafka 2.16 crashes (heap corruption) on a
    # request-level error in DescribeUserScramCredentials after an earlier successful describe.
    with alice_wire(acl_broker) as wire:
        denied = wire.request(50, 0, request_class(50)[0](users=None))
        assert (denied.error_code, denied.results) == (CKError.CLUSTER_AUTHORIZATION_FAILED, [])


def test_scram_user_with_an_eight_byte_salt(acl_broker: SecureBrokerHandle) -> None:
    """Kafka takes any non-empty salt (confluent-kafka's own admin test uses 8 bytes, under RFC 7677's 12): the
    upsertion succeeds and the user logs in with SCRAM through librdkafka and kafka-python."""
    from kafka import KafkaAdminClient

    a = admin(acl_broker)
    for mechanism, iterations in ((ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 10000)):
        info = ScramCredentialInfo(mechanism, iterations)
        a.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", info, b"dave-pw", b"8bytesal")]
                                       )["dave"].result(30)
    described = a.describe_user_scram_credentials(["dave"])["dave"].result(30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 10000)]
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        conf = acl_broker.confluent_config("SASL_PLAINTEXT", mech, user="alice")
        conf.update({"sasl.username": "dave", "sasl.password": "dave-pw"})
        metadata = AdminClient(conf).list_topics(timeout=30)  # raises unless the SCRAM login succeeds
        assert metadata.brokers
        kp_conf = acl_broker.kafka_python_config("SASL_PLAINTEXT", mech, user="alice")
        kp_conf.update(sasl_plain_username="dave", sasl_plain_password="dave-pw")
        KafkaAdminClient(request_timeout_ms=10_000, **kp_conf).close()
    a.alter_user_scram_credentials([UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256),
                                    UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]
                                   )["dave"].result(30)


def kp(b: SecureBrokerHandle, **extra: Any) -> dict[str, Any]:
    return {**b.kafka_python_config("SASL_PLAINTEXT", "PLAIN", user="alice"), **extra}


def test_produce_denied_without_write_acl(acl_broker: SecureBrokerHandle) -> None:
    from kafka import KafkaProducer
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

    create_topic(acl_broker, "acl-produce")
    producer = KafkaProducer(**kp(acl_broker, enable_idempotence=False, max_block_ms=10_000))
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("acl-produce", b"v").get(30)
    producer.close()
    # idempotence needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679)
    with pytest.raises((ClusterAuthorizationFailedError, TopicAuthorizationFailedError)):
        p = KafkaProducer(**kp(acl_broker, max_block_ms=10_000))
        try:
            p.send("acl-produce", b"v").get(30)
        finally:
            p.close(timeout=5)
    create_acls(acl_broker, [allow("User:alice", ResourceType.TOPIC, "acl-produce", AclOperation.WRITE)])
    producer = KafkaProducer(**kp(acl_broker))  # idempotent: allowed by the WRITE ACL
    assert producer.send("acl-produce", b"v").get(30).offset == 0
    producer.close()


def test_produce_13_by_topic_id_is_authorized_by_the_resolved_name(acl_broker: SecureBrokerHandle) -> None:
    """KafkaApis.handleProduceRequest: WRITE is checked on the topic's name once its id is resolved."""
    import uuid

    from tidelog.protocol.records import Record, build_batch

    create_topic(acl_broker, "acl-by-id")
    info = acl_broker.state.topics.get("acl-by-id")
    assert info is not None
    tid = uuid.UUID(bytes=bytes(info.topic_id))
    cls = request_class(0)[13]
    T = cls.TopicProduceData
    records = bytes(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")], 0))

    def produce_as_alice() -> int:
        wire = alice_wire(acl_broker)
        try:
            response = wire.request(0, 13, cls(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
                T(topic_id=tid, partition_data=[T.PartitionProduceData(index=0, records=records)])]))
        finally:
            wire.close()
        [topic] = response.responses
        assert topic.topic_id == tid
        return int(topic.partition_responses[0].error_code)

    assert produce_as_alice() == 29  # TOPIC_AUTHORIZATION_FAILED
    create_acls(acl_broker, [allow("User:alice", ResourceType.TOPIC, "acl-by-id", AclOperation.WRITE)])
    assert produce_as_alice() == 0


def test_fetch_and_group_denied_without_read_acls(acl_broker: SecureBrokerHandle) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import GroupAuthorizationFailedError

    create_topic(acl_broker, "acl-fetch")
    producer = KafkaProducer(**acl_broker.kafka_python_config("SASL_PLAINTEXT", "PLAIN", user="admin"))
    producer.send("acl-fetch", b"record").get(30)
    producer.close()

    def consume(group: str | None, wait_s: float = 30) -> list[bytes]:
        consumer = KafkaConsumer(**kp(acl_broker, group_id=group, auto_offset_reset="earliest",
                                      enable_auto_commit=False))
        try:
            from kafka import TopicPartition

            if group is None:
                consumer.assign([TopicPartition("acl-fetch", 0)])
            else:
                consumer.subscribe(["acl-fetch"])
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                batch = consumer.poll(500)
                records = [r.value for rs in batch.values() for r in rs]
                if records:
                    if group is not None:
                        consumer.commit()
                    return records
            return []
        finally:
            consumer.close()

    def fetch_error() -> int:
        with alice_wire(acl_broker) as wire:
            response = wire.request(1, 4, request_class(1)[4](
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                topics=[request_class(1)[4].FetchTopic(topic="acl-fetch", partitions=[
                    request_class(1)[4].FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                                                    partition_max_bytes=1 << 20)])]))
            return int(response.responses[0].partitions[0].error_code)

    assert fetch_error() == CKError.TOPIC_AUTHORIZATION_FAILED
    # kafka-python never learns a leader for a topic it may not describe; allowed, it reads within a second
    assert consume(None, wait_s=5) == []
    create_acls(acl_broker, [allow("User:alice", ResourceType.TOPIC, "acl-", AclOperation.READ,
                                   ResourcePatternType.PREFIXED)])
    assert fetch_error() == 0
    assert consume(None) == [b"record"]
    with pytest.raises(GroupAuthorizationFailedError):
        consume("acl-group")
    create_acls(acl_broker, [allow("User:alice", ResourceType.GROUP, "acl-group", AclOperation.READ)])
    assert consume("acl-group") == [b"record"]


def test_admin_apis_denied_without_acls(acl_broker: SecureBrokerHandle) -> None:
    alice = admin(acl_broker, "alice")

    def error_of(fut: Any) -> int | None:
        try:
            fut.result(30)
        except KafkaException as exc:
            return int(exc.args[0].code())
        return None

    assert error_of(alice.create_topics([NewTopic("acl-admin", 1, 1)])["acl-admin"]) == \
        CKError.TOPIC_AUTHORIZATION_FAILED
    create_acls(acl_broker, [allow("User:alice", ResourceType.BROKER, "kafka-cluster", AclOperation.CREATE)])
    assert error_of(alice.create_topics([NewTopic("acl-admin", 1, 1)])["acl-admin"]) is None
    resource = ConfigResource(ConfigResource.Type.TOPIC, "acl-admin")
    assert error_of(alice.describe_configs([resource])[resource]) == CKError.TOPIC_AUTHORIZATION_FAILED
    assert error_of(alice.delete_topics(["acl-admin"])["acl-admin"]) == CKError.TOPIC_AUTHORIZATION_FAILED
    create_acls(acl_broker, [allow("User:alice", ResourceType.TOPIC, "acl-admin", AclOperation.ALTER_CONFIGS),
                             allow("User:alice", ResourceType.TOPIC, "acl-admin", AclOperation.DELETE)])
    assert error_of(alice.describe_configs([resource])[resource]) is None  # implied by ALTER_CONFIGS
    # Metadata lists only what alice may describe (DELETE implies DESCRIBE)
    assert "acl-admin" in set(alice.list_topics(timeout=30).topics)
    assert error_of(alice.delete_topics(["acl-admin"])["acl-admin"]) is None


def test_metadata_lists_only_describable_topics(acl_broker: SecureBrokerHandle) -> None:
    create_topic(acl_broker, "meta-visible")
    create_topic(acl_broker, "meta-hidden")
    create_acls(acl_broker, [allow("User:alice", ResourceType.TOPIC, "meta-visible", AclOperation.DESCRIBE)])
    alice = admin(acl_broker, "alice")
    topics = set(alice.list_topics(timeout=30).topics)
    assert "meta-visible" in topics
    assert "meta-hidden" not in topics
    assert "meta-hidden" in set(admin(acl_broker).list_topics(timeout=30).topics)


@pytest.mark.java
def test_java_admin_acls_and_scram_users(acl_broker: SecureBrokerHandle, java_security_admin: Any) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    def run(mode: str, user: str) -> dict[str, Any]:
        props = acl_broker.java_properties("SASL_SSL", "SCRAM-SHA-512", user=user)
        bootstrap = props.pop("bootstrap.servers")
        cmd = ["java", "-cp", java_security_admin.classpath, "SecurityAdmin", mode, bootstrap,
               *(f"{k}={v}" for k, v in props.items())]
        import json
        import subprocess

        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]  # type: ignore[return-value]

    created = run("create", "admin")
    assert created == [{"acls": 2, "matching_topic": 1},
                       {"user": "jim", "mechanism": "SCRAM_SHA_512", "iterations": 8192}]
    conf = {"bootstrap_servers": acl_broker.listeners["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "jim", "sasl_plain_password": "jim-pw"}
    create_topic(acl_broker, "java-sec-orders")
    producer = KafkaProducer(**conf)
    assert producer.send("java-sec-orders", b"v").get(30).offset == 0  # jim's WRITE on the prefix
    producer.close()
    assert run("denied", "alice") == [{"describe_acls": "ClusterAuthorizationException",
                                       "describe_users": "ClusterAuthorizationException"}]
    assert run("delete", "admin") == [{"deleted": 2, "user_present": False}]
    with pytest.raises(KafkaPythonError):
        KafkaProducer(max_block_ms=3_000, bootstrap_timeout_ms=3_000, **conf).send("java-sec-orders", b"v").get(30)
