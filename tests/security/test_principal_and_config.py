"""Principals (RFC 2253 DN, ssl.principal.mapping.rules), JAAS parsing and per-listener configs."""

from __future__ import annotations

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.definitions import ConfigError
from tidelog.security.jaas import parse_jaas
from tidelog.security.listener_config import listener_security, listener_value
from tidelog.security.principal import SslPrincipalMapper, distinguished_name, parse_principal
from tidelog.security.throwaway_ca import ThrowawayCA


def test_distinguished_name_is_rfc2253_most_specific_first(tmp_path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    ca = ThrowawayCA(tmp_path)
    issued = ca.issue("alice, the admin")
    der = x509.load_pem_x509_certificate(issued.cert_pem.read_bytes()).public_bytes(Encoding.DER)
    # Java's X500Principal.getName(): CN first, a comma inside a value escaped with a backslash.
    assert distinguished_name(der) == "CN=alice\\, the admin,OU=test,O=tidelog-test"


@pytest.mark.parametrize(("rules", "dn", "expected"), [
    ("DEFAULT", "CN=alice,OU=test,O=acme", "CN=alice,OU=test,O=acme"),
    ("RULE:^CN=(.*?),OU=test.*$/$1/,DEFAULT", "CN=alice,OU=test,O=acme", "alice"),
    ("RULE:^CN=(.*?),OU=test.*$/$1/U", "CN=alice,OU=test,O=acme", "ALICE"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$3/L, DEFAULT", "CN=Bob,OU=x,O=ACME", "bob@acme"),
    ("RULE:^CN=nomatch$/x/, DEFAULT", "CN=Bob", "CN=Bob"),
])
def test_ssl_principal_mapping_rules(rules: str, dn: str, expected: str) -> None:
    assert SslPrincipalMapper.from_rules(rules).get_name(dn) == expected


def test_mapping_without_matching_rule_refuses() -> None:
    with pytest.raises(ValueError):
        SslPrincipalMapper.from_rules("RULE:^CN=x$/y/").get_name("CN=alice")
    with pytest.raises(ValueError):
        SslPrincipalMapper.from_rules("nonsense")


def test_parse_principal() -> None:
    p = parse_principal("User:CN=a,O=b")
    assert (p.principal_type, p.name, str(p)) == ("User", "CN=a,O=b", "User:CN=a,O=b")
    with pytest.raises(ValueError):
        parse_principal("alice")


def test_parse_jaas_plain_login_module() -> None:
    entry = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required '
                       'username="admin" password="admin-secret" user_admin="admin-secret" '
                       'user_alice="p\\"w;d";')
    assert entry.login_module.endswith("PlainLoginModule")
    assert entry.flag == "required"
    assert entry.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                             "user_alice": 'p"w;d'}
    with pytest.raises(ConfigError):
        parse_jaas('PlainLoginModule required user_a="x"')  # no ';'


def test_listener_overrides_and_protocol_map() -> None:
    config = BrokerConfig({
        "listeners": "INTERNAL://127.0.0.1:0,CLIENTS://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENTS:SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.clients.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.clients.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="b";',
        "listener.name.clients.ssl.client.auth": "required",
        "log.dirs": "/tmp/unused",
    })
    assert config.unknown == {}  # listener.name.* are known (Kafka's ListenerName.configPrefix)
    assert listener_value(config, "CLIENTS", "ssl.client.auth") == "required"
    assert listener_value(config, "INTERNAL", "ssl.client.auth") == "none"
    sec = listener_security(config, "CLIENTS")
    assert (sec.protocol, sec.mechanisms) == ("SASL_SSL", ("SCRAM-SHA-512", "PLAIN"))
    assert sec.jaas["PLAIN"].options == {"user_bob": "b"}
    assert listener_security(config, "INTERNAL").protocol == "PLAINTEXT"


def test_sasl_ssl_listener_names_parse() -> None:
    config = BrokerConfig({"listeners": "SASL_SSL://localhost:9093,PLAINTEXT://:9092", "log.dirs": "/tmp/x"})
    from tidelog.config.broker_config import parse_listeners

    assert parse_listeners(config.listeners) == [("SASL_SSL", "localhost", 9093), ("PLAINTEXT", "", 9092)]
