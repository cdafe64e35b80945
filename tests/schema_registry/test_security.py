"""On a broker with TLS and SASL listeners the registry speaks HTTPS with the broker's certificate and takes HTTP Basic credentials of the same users (PLAIN from the JAAS
config, SCRAM from the credential store): writes need them, wrong ones are refused everywhere (401/40101), reads
without any stay open (deserializers fetch schemas by id)."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tidelog.security.scram_store import ScramCredential
from tidelog.testing import SecureBrokerHandle, run_secure_broker

CONTEXT: ssl.SSLContext | None = None  # trusts the module broker's throwaway CA (set by the fixture)
SCHEMA = json.dumps({"type": "record", "name": "Secret", "fields": [{"name": "x", "type": "int"}]})


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    global CONTEXT
    with run_secure_broker(users={"alice": "alice-secret"}, overrides={"schema.registry.port": 0}) as broker:
        CONTEXT = ssl.create_default_context(cafile=str(broker.ca.ca_pem))
        try:
            yield broker
        finally:
            CONTEXT = None


def registry_url(secure: SecureBrokerHandle) -> str:
    """The registry's HTTPS address under the name its certificate carries."""
    url = secure.broker.schema_registry_url
    assert url.startswith("https://127.0.0.1:")
    return url.replace("https://127.0.0.1:", "https://localhost:")


def call(url: str, method: str, path: str, body: Any = None, user: str | None = None, password: str = "",
         context: ssl.SSLContext | None = None) -> tuple[int, Any, str | None]:
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60, context=context or CONTEXT) as response:
            return response.status, json.loads(response.read()), None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), e.headers.get("WWW-Authenticate")


def test_writes_need_a_broker_user(secure: SecureBrokerHandle) -> None:
    url = registry_url(secure)
    status, answer, challenge = call(url, "POST", "/subjects/s1/versions", {"schema": SCHEMA})
    assert (status, answer["error_code"]) == (401, 40101) and challenge == 'Basic realm="SchemaRegistry"'
    assert call(url, "PUT", "/config", {"compatibility": "NONE"})[0] == 401
    assert call(url, "POST", "/subjects/s1/versions", {"schema": SCHEMA}, "alice", "wrong")[0] == 401
    assert call(url, "POST", "/subjects/s1/versions", {"schema": SCHEMA}, "mallory", "alice-secret")[0] == 401
    status, answer, _ = call(url, "POST", "/subjects/s1/versions", {"schema": SCHEMA}, "alice", "alice-secret")
    assert status == 200 and answer["version"] == 1
    # reads stay open without credentials, and wrong credentials are refused on reads too
    assert call(url, "GET", f"/schemas/ids/{answer['id']}")[0] == 200
    assert call(url, "GET", "/subjects", user="alice", password="nope")[0] == 401


def test_a_scram_only_user_logs_in(secure: SecureBrokerHandle) -> None:
    """A user with SCRAM credentials only (created after start-up, as AlterUserScramCredentials would)."""
    store = secure.state.security.scram_store
    store.put("bob", "SCRAM-SHA-512", ScramCredential.from_password("SCRAM-SHA-512", "bob-secret"))
    url = registry_url(secure)
    assert call(url, "POST", "/subjects/s2/versions", {"schema": SCHEMA}, "bob", "bob-secret")[0] == 200
    assert call(url, "POST", "/subjects/s2/versions", {"schema": SCHEMA}, "bob", "bob-wrong")[0] == 401
    # a changed credential ends the verified login at once, not when the registry's cache expires
    store.put("bob", "SCRAM-SHA-512", ScramCredential.from_password("SCRAM-SHA-512", "bob-new"))
    assert call(url, "POST", "/subjects/s2/versions", {"schema": SCHEMA}, "bob", "bob-secret")[0] == 401
    assert call(url, "POST", "/subjects/s2/versions", {"schema": SCHEMA}, "bob", "bob-new")[0] == 200


def test_confluent_client_with_basic_auth(secure: SecureBrokerHandle) -> None:
    url = registry_url(secure)
    ca = str(secure.ca.ca_pem)
    client = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret", "ssl.ca.location": ca})
    schema_id = client.register_schema("s3", Schema(SCHEMA, "AVRO"))
    assert client.get_latest_version("s3").schema_id == schema_id
    anonymous = SchemaRegistryClient({"url": url, "ssl.ca.location": ca})
    with pytest.raises(SchemaRegistryError) as refused:
        anonymous.register_schema("s3-other", Schema(SCHEMA, "AVRO"))
    assert refused.value.http_status_code == 401
    assert json.loads(anonymous.get_schema(schema_id).schema_str) == json.loads(SCHEMA)


def test_plain_http_is_refused_on_a_tls_broker(secure: SecureBrokerHandle) -> None:
    url = registry_url(secure).replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(url + "/subjects", timeout=30)
