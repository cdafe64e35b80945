"""Client quotas on a `user` entity apply to a SASL principal (Kafka's DefaultQuotaCallback resolves the
session's principal name): alice under a request_percentage on user=alice is throttled over SASL_PLAINTEXT
(confluent-kafka's throttle_cb), admin beside her is not, and the controller mutation quota of user=alice refuses
her excess topic (kafka-python's admin, strict CreateTopics) while admin creates freely."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidelog.testing import KafkaWire, SecureBrokerHandle, run_secure_broker

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    # its own broker: a request_percentage once set keeps request timing on for the broker's lifetime
    with run_secure_broker(users=USERS, overrides={"quota.window.num": 2, "quota.window.size.seconds": 1}) as handle:
        yield handle


def _set_user_quota(handle: SecureBrokerHandle, user: str, key: str, value: float | None) -> None:
    with KafkaWire(handle.listeners["PLAINTEXT"]) as wire:
        wire.alter_client_quota("user", user, key, value)


def test_user_request_quota_throttles_the_sasl_principal(secure: SecureBrokerHandle) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    _set_user_quota(secure, "alice", "request_percentage", 0.0001)
    admin = AdminClient(secure.confluent_config("SASL_PLAINTEXT", "SCRAM-SHA-256", user="admin"))
    for future in admin.create_topics([NewTopic("quota-users", 1, 1)]).values():
        future.result(60)
    throttles: dict[str, list[float]] = {"alice": [], "admin": []}
    for user in ("alice", "admin"):
        conf = secure.confluent_config("SASL_PLAINTEXT", "SCRAM-SHA-256", user=user)
        producer = Producer({**conf, "client.id": "same-client-id", "linger.ms": 0,
                             "throttle_cb": lambda event, user=user: throttles[user].append(event.throttle_time)})
        for _ in range(3):
            producer.produce("quota-users", b"v")
            assert producer.flush(60) == 0
        producer.poll(0)
    assert throttles["alice"] and max(throttles["alice"]) > 0, throttles
    assert not any(throttles["admin"]), throttles
    # the broker's Request sensors are tagged with the user entity (user=alice, client-id "")
    rows = {(user, client): throttle for user, client, _, throttle in secure.state.quotas.request.metrics()}
    assert rows[("alice", "")] > 0


def test_user_mutation_quota_refuses_the_sasl_principals_excess_topic(secure: SecureBrokerHandle) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    _set_user_quota(secure, "alice", "request_percentage", None)  # kafka-python fails a throttled node's requests
    _set_user_quota(secure, "alice", "controller_mutation_rate", 1.0)  # a bucket of at most 2 partitions
    results: dict[str, dict[str, int]] = {}
    for user in ("alice", "admin"):
        admin = KafkaAdminClient(**secure.kafka_python_config("SASL_PLAINTEXT", "SCRAM-SHA-256", user=user))
        try:
            # strict CreateTopics (v6+): 2 + 2 partitions pass a full bucket (the second takes it to -2), the
            # third topic is refused, whatever order the three are handled in
            response = admin.create_topics([NewTopic(f"{user}-{i}", 2, 1) for i in range(3)], raise_errors=False)
        finally:
            admin.close()
        results[user] = {t["name"]: t["error_code"] for t in response["topics"]}
    assert sorted(results["alice"].values()) == [0, 0, 89], results  # THROTTLING_QUOTA_EXCEEDED
    assert set(results["admin"].values()) == {0}, results
