"""ACLs and SCRAM users are durable: created through the admin APIs, they survive a SIGKILL and restart, and
the restarted broker authenticates and authorizes with them."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tidelog.testing import BrokerProcess, free_port

pytestmark = pytest.mark.slow


def test_acls_and_scram_users_survive_sigkill(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError
    from kafka.errors import TopicAuthorizationFailedError

    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener is the operator's
    }
    broker = BrokerProcess(tmp_path / "data", port=plain, overrides=overrides).start()
    try:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dave", info, b"dave-pw")]
                                           )["dave"].result(30)
        binding = AclBinding(ResourceType.TOPIC, "dur-", ResourcePatternType.PREFIXED, "User:dave", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
        admin.create_acls([binding])[binding].result(30)
        admin.create_topics([NewTopic("dur-topic", 1, 1)])["dur-topic"].result(30)  # dave may not CREATE
        del admin
        broker.kill()  # SIGKILL: no clean shutdown
        broker.start()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                      AclOperation.ANY, AclPermissionType.ANY)
        assert admin.describe_acls(everything).result(30) == [binding]
        described = admin.describe_user_scram_credentials(["dave"])["dave"].result(30)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
            [(ScramMechanism.SCRAM_SHA_512, 4096)]
        conf = {"bootstrap_servers": f"127.0.0.1:{sasl}", "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "dave"}
        producer = KafkaProducer(sasl_plain_password="dave-pw", **conf)
        assert producer.send("dur-topic", b"v").get(30).offset == 0  # WRITE on the prefix (idempotent too)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("other-topic", b"v").get(30)
        producer.close()
        with pytest.raises(KafkaPythonError):
            # kafka-python retries a refused login until its bootstrap timeout (30 s by default)
            KafkaAdminClient(sasl_plain_password="wrong", request_timeout_ms=10_000, bootstrap_timeout_ms=3_000, **conf)
        stored = (tmp_path / "data" / "tidelog-scram-credentials.json").read_text()
        assert "dave-pw" not in stored
    finally:
        broker.stop()
