"""`tidelog acl ...` and `tidelog user ...` over SASL (-X client configs) on a broker with an authorizer: ACLs the
command creates are what kafka-python's describe_acls answers, a SCRAM user it creates can log in, and one it
deletes no longer can; a wrong password is one line and exit code 1, at the first refusal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.commands.conftest import tidelog, tidelog_json, unique
from tidelog.testing import SecureBrokerHandle, run_secure_broker

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    # Kafka's default delay before closing a failed login (run_secure_broker's 0 races kafka-python's reading
    # of the SaslAuthenticate error with the close)
    with run_secure_broker(users=USERS, authorizer=True, super_users=["User:admin"],
                           overrides={"connection.failed.authentication.delay.ms": 100}) as handle:
        yield handle


def sasl(user: str = "admin", password: str | None = None) -> list[str]:
    return ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-512",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password or USERS[user]}"]


def kafka_python_admin(secure: SecureBrokerHandle, user: str = "admin", password: str | None = None,
                       **extra: Any) -> Any:
    from kafka import KafkaAdminClient

    config = secure.kafka_python_config("SASL_PLAINTEXT", "SCRAM-SHA-512", user=user if user in USERS else None)
    config.update(sasl_plain_username=user, sasl_plain_password=password or USERS.get(user), **extra)
    return KafkaAdminClient(**config)


def test_acls_created_listed_and_deleted(secure: SecureBrokerHandle) -> None:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as RT

    bootstrap = secure.listeners["SASL_PLAINTEXT"]
    topic = unique("cli-acl")
    created = tidelog_json("acl", "create", "--principal", "User:alice", "--operation", "read", "--operation",
                           "describe", "--topic", topic, *sasl(), bootstrap=bootstrap)
    assert [(r["operation"], r["permission"], r["error"]) for r in created] == [
        ("READ", "ALLOW", None), ("DESCRIBE", "ALLOW", None)]

    admin = kafka_python_admin(secure)
    try:
        def alice_acls() -> set[tuple[str, str, str, str, str]]:
            acls, _ = admin.describe_acls(ACLFilter(
                principal="User:alice", host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(RT.TOPIC, topic, ACLResourcePatternType.ANY)))
            return {(a.resource_pattern.resource_name, a.resource_pattern.pattern_type.name, a.host,
                     a.operation.name, a.permission_type.name) for a in acls}

        assert alice_acls() == {(topic, "LITERAL", "*", "READ", "ALLOW"), (topic, "LITERAL", "*", "DESCRIBE", "ALLOW")}

        # a login module line (-X sasl.jaas.config) works as well as sasl.username/sasl.password
        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
                'password="admin-secret";')
        listed = tidelog("acl", "list", "--principal", "User:alice", "-X", "security.protocol=SASL_PLAINTEXT",
                         "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", f"sasl.jaas.config={jaas}", bootstrap=bootstrap)
        assert listed.returncode == 0, listed.stderr
        assert sorted(line.split() for line in listed.stdout.splitlines()[1:]) == [
            ["User:alice", "*", "TOPIC", topic, "LITERAL", op, "ALLOW"] for op in ("DESCRIBE", "READ")]

        deleted = tidelog_json("acl", "delete", "--principal", "User:alice", "--topic", topic, "--operation", "read",
                               *sasl(), bootstrap=bootstrap)
        assert [(r["resource_name"], r["operation"]) for r in deleted] == [(topic, "READ")]
        assert alice_acls() == {(topic, "LITERAL", "*", "DESCRIBE", "ALLOW")}
    finally:
        admin.close()


def test_scram_user_created_logs_in_and_deleted_cannot(secure: SecureBrokerHandle) -> None:
    import kafka.errors

    bootstrap = secure.listeners["SASL_PLAINTEXT"]
    user = unique("carol")
    created = tidelog_json("user", "create", user, "--password-stdin", "--mechanism", "SCRAM-SHA-512",
                           *sasl(), bootstrap=bootstrap, stdin="carol's secret\n")
    assert created == {"user": user, "mechanisms": ["SCRAM-SHA-512"], "error": None}
    users = {u["user"]: u for u in tidelog_json("user", "list", *sasl(), bootstrap=bootstrap)}
    assert users[user]["credentials"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    assert {"admin", "alice"} <= set(users)

    kafka_python_admin(secure, user, "carol's secret").close()  # the new user logs in

    # a wrong password: one line naming Kafka's error, at the first refusal (not after the 30 s timeout)
    refused = tidelog("topic", "list", *sasl(user, "not carol's"), bootstrap=bootstrap)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") == 1 and "SASL_AUTHENTICATION_FAILED" in refused.stderr

    deleted = tidelog_json("user", "delete", user, *sasl(), bootstrap=bootstrap)
    assert deleted == {"user": user, "mechanisms": ["SCRAM-SHA-512"], "error": None}
    with pytest.raises(kafka.errors.KafkaError):
        kafka_python_admin(secure, user, "carol's secret", bootstrap_timeout_ms=3000).close()


def test_tls_listener_with_a_ca_file(secure: SecureBrokerHandle) -> None:
    """-X security.protocol=SSL and ssl.ca.location (librdkafka's name) reach kafka-python's TLS settings; the
    SSL listener requests but does not require a client certificate."""
    info = tidelog_json("cluster", "info", "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={secure.ca.ca_pem}",
                        bootstrap=secure.listeners["SSL"])
    assert info["cluster_id"] == secure.state.cluster_id
    missing = tidelog("cluster", "info", "-X", "security.protocol=SSL", "-X", "ssl.ca.location=/no/such/ca.pem",
                      bootstrap=secure.listeners["SSL"])
    assert (missing.returncode, missing.stderr.strip()) == (
        1, "tidelog cluster info: -X ssl.ca.location=/no/such/ca.pem: no such file")
