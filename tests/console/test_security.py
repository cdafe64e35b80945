"""The console on a broker with SASL listeners and ACLs: it asks for the broker's credentials, shows a user only
what their principal may describe, refuses a wrong password, and never sends a password, salt or sensitive
config value (every response of every page and API is searched)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.console.conftest import screenshot
from tidelog.testing import SecureBrokerHandle, run_secure_broker

USERS = {"alice": "alice-Pa55word", "admin": "admin-Pa55word"}
TOPICS = ("alice-orders", "payroll")


@pytest.fixture(scope="module")
def secure() -> Iterator[SecureBrokerHandle]:
    with run_secure_broker(users=USERS, authorizer=True, super_users=["User:admin"],
                           overrides={"metrics.port": 0, "console.read.only": "false"}) as handle:
        admin = AdminClient(handle.confluent_config("SASL_PLAINTEXT", "SCRAM-SHA-512", user="admin"))
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
            future.result(30)
        allow = [AclBinding(ResourceType.TOPIC, "alice-orders", ResourcePatternType.LITERAL, "User:alice", "*",
                            op, AclPermissionType.ALLOW) for op in (AclOperation.DESCRIBE, AclOperation.READ)]
        for future in admin.create_acls(allow, request_timeout=30).values():
            future.result(30)
        producer = Producer(handle.confluent_config("SASL_PLAINTEXT", "SCRAM-SHA-512", user="admin"))
        for topic in TOPICS:
            producer.produce(topic, key=b"k", value=f"in {topic}".encode())
        assert producer.flush(30) == 0
        yield handle


class Session:
    """A cookie-keeping HTTP client of the console; every body it receives is kept for the secret search."""

    def __init__(self, handle: SecureBrokerHandle) -> None:
        self.base = f"http://127.0.0.1:{handle.state.metrics.wait_http_port()}"
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()),
                                                  _NoRedirect())
        self.seen: list[str] = []

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"} if data else {})
        try:
            with self.opener.open(request, timeout=60) as response:
                status, raw, headers = response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as e:
            status, raw, headers = e.code, e.read(), dict(e.headers)
        text = raw.decode()
        self.seen.append(text)
        is_json = headers.get("Content-Type", "").startswith("application/json")
        return status, json.loads(text) if is_json and text else text, headers

    def login(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> int:
        return self.call("POST", "/api/login", {"username": user, "password": password,
                                                 "mechanism": mechanism})[0]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 302 itself is what the tests look at


def test_login_is_required_and_a_wrong_password_refused(secure: SecureBrokerHandle) -> None:
    s = Session(secure)
    status, body, _ = s.call("GET", "/api/topics")
    assert status == 401 and "log in" in body["error"]
    status, _, headers = s.call("GET", "/topics")
    assert status == 302 and headers["Location"].startswith("/login")
    assert s.call("GET", "/api/cleaner")[0] == 401
    assert s.login("alice", "not-her-password") == 401
    assert s.login("mallory", "whatever", "PLAIN") == 401
    assert s.call("GET", "/api/topics")[0] == 401
    assert "tidelog_requests_total" in s.call("GET", "/metrics")[1]  # Prometheus stays open


def test_a_user_sees_only_the_topics_their_principal_may_describe(secure: SecureBrokerHandle) -> None:
    alice = Session(secure)
    assert alice.login("alice", USERS["alice"]) == 200
    assert [t["name"] for t in alice.call("GET", "/api/topics")[1]] == ["alice-orders"]
    assert alice.call("GET", "/api/topics/payroll")[0] == 403
    assert alice.call("GET", "/api/topics/payroll/records")[0] in (403, 404)
    records = alice.call("GET", "/api/topics/alice-orders/records")[1]["records"]
    assert [r["value"]["text"] for r in records] == ["in alice-orders"]
    assert {r["topic"] for r in alice.call("GET", "/api/cleaner")[1]} <= {"alice-orders"}
    status, body, _ = alice.call("POST", "/api/topics", {"name": "alice-made"})
    assert status == 403, body  # no CSRF token; with it, the broker's ACLs would answer
    token = alice.call("GET", "/api/session")[1]["csrf_token"]
    request = urllib.request.Request(alice.base + "/api/topics", method="POST",
                                     data=json.dumps({"name": "alice-made"}).encode(),
                                     headers={"Content-Type": "application/json", "X-CSRF-Token": token})
    try:
        alice.opener.open(request, timeout=60)
        raise AssertionError("alice may not create topics")
    except urllib.error.HTTPError as e:
        assert e.code == 403 and "Authorization" in json.loads(e.read())["error"]

    admin = Session(secure)
    assert admin.login("admin", USERS["admin"], "PLAIN") == 200
    assert [t["name"] for t in admin.call("GET", "/api/topics")[1]] == ["alice-orders", "payroll"]
    security = admin.call("GET", "/api/security")[1]
    assert security["authorizer"] is True
    assert {(a["resource_name"], a["principal"], a["operation"]) for a in security["acls"]} == {
        ("alice-orders", "User:alice", "DESCRIBE"), ("alice-orders", "User:alice", "READ")}
    assert [u["user"] for u in security["scram_users"]] == ["admin", "alice"]
    assert {c["mechanism"] for c in security["scram_users"][1]["credentials"]} == {"SCRAM-SHA-256",
                                                                                   "SCRAM-SHA-512"}


def test_no_response_holds_a_password_salt_or_sensitive_value(secure: SecureBrokerHandle) -> None:
    s = Session(secure)
    s.login("alice", "wrong")
    assert s.login("admin", USERS["admin"]) == 200
    for path in ["/", "/topics", "/topics/alice-orders", "/topics/payroll", "/topics/payroll/messages",
                 "/groups", "/compaction", "/login", "/transactions", "/security", "/api/security",
                 "/api/transactions", "/api/topics/payroll/producers", "/api/session", "/api/overview", "/api/traffic",
                 "/api/topics", "/api/topics/payroll", "/api/topics/payroll/records?full=1", "/api/groups",
                 "/api/cleaner"]:
        status, _, _ = s.call("GET", path)
        assert status == 200, path
    from tidelog.security.scram_store import MECHANISMS, ScramCredentialStore

    store = ScramCredentialStore(secure.broker.log_dir)
    secrets = set(USERS.values())
    for user in USERS:
        for mechanism in MECHANISMS:
            credential = store.get(user, mechanism)
            assert credential is not None
            for value in (credential.salt, credential.stored_key, credential.server_key):
                secrets |= {base64.b64encode(value).decode(), value.hex()}
    secrets.add("PlainLoginModule")  # the listeners' sasl.jaas.config (which holds the PLAIN passwords)
    everything = "\n".join(s.seen)
    assert len(s.seen) >= 23 and "payroll" in everything and "SCRAM-SHA-512 (4096)" in everything
    for secret in secrets:
        assert secret not in everything


def test_login_page_in_the_browser(secure: SecureBrokerHandle, page: Any) -> None:
    base = f"http://127.0.0.1:{secure.state.metrics.wait_http_port()}"
    page.goto(base + "/topics")
    assert "/login" in page.url
    page.fill("#login input[name=username]", "alice")
    page.fill("#login input[name=password]", "wrong")
    page.click("#login button[type=submit]")
    assert page.locator("#login-error").inner_text().startswith("login refused")
    screenshot(page, "login-refused")
    page.fill("#login input[name=username]", "alice")
    page.fill("#login input[name=password]", USERS["alice"])
    page.click("#login button[type=submit]")
    page.wait_for_url("**/topics")
    assert page.locator("#user").inner_text() == "alice"
    assert [page.locator("#topics tr[data-topic]").nth(i).get_attribute("data-topic")
            for i in range(page.locator("#topics tr[data-topic]").count())] == ["alice-orders"]
    screenshot(page, "topics-as-alice")


@pytest.mark.parametrize(("overrides", "refused"), [
    ({"metrics.host": "0.0.0.0", "console.read.only": "false"}, True),
    ({"metrics.host": "0.0.0.0"}, False),  # read-only
    ({"metrics.host": "127.0.0.1", "console.read.only": "false"}, False),  # loopback
    ({"metrics.host": "0.0.0.0", "console.read.only": "false", "console.enable": "false"}, False),
    ({"metrics.host": "0.0.0.0", "console.read.only": "false", "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
      "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT"}, False),  # the console asks a login
])
def test_writes_on_a_non_loopback_address_without_login_are_refused_at_start_up(
        overrides: dict[str, str], refused: bool) -> None:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.config.definitions import ConfigError

    settings = {"metrics.port": "0", **overrides}
    if refused:
        with pytest.raises(ConfigError, match="console.read.only=false with metrics.host=0.0.0.0"):
            BrokerConfig.load(None, {}, settings)
    else:
        BrokerConfig.load(None, {}, settings)
