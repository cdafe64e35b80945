"""SASL mechanism servers driven by real client-side implementations (scramp's client for SCRAM), the SCRAM
credential store, and TLS contexts from PEM / PKCS12 keystores and truststores."""

from __future__ import annotations

import base64
import json
import re
import ssl
from pathlib import Path

import pytest
import scramp

from tidelog.clock import ManualClock
from tidelog.config.broker_config import BrokerConfig
from tidelog.config.definitions import ConfigError
from tidelog.protocol.errors import ErrorCode
from tidelog.security.sasl import SaslAuthenticationError
from tidelog.security.sasl.oauthbearer import OAuthBearerSaslServer
from tidelog.security.sasl.plain import PlainSaslServer
from tidelog.security.sasl.scram import ScramSaslServer
from tidelog.security.scram_store import ScramCredential, ScramCredentialStore, Upsertion
from tidelog.security.ssl_context import create_server_context
from tidelog.security.throwaway_ca import ThrowawayCA


def test_plain() -> None:
    server = PlainSaslServer.from_jaas_options({"user_alice": "s3cret", "username": "admin"})
    assert server.evaluate_response(b"\x00alice\x00s3cret") == b""
    assert server.complete and server.authorization_id == "alice"
    for token, message in [(b"\x00alice\x00wrong", "Invalid username or password"),
                           (b"\x00nobody\x00s3cret", "Invalid username or password"),
                           (b"bob\x00alice\x00s3cret", "authorization id"),
                           (b"alice\x00s3cret", "expected 3 tokens"),
                           (b"\x00\x00s3cret", "username not specified")]:
        with pytest.raises(SaslAuthenticationError, match=message) as info:
            PlainSaslServer.from_jaas_options({"user_alice": "s3cret"}).evaluate_response(token)
        assert "s3cret" not in str(info.value) and "wrong" not in str(info.value)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_scramp_client(tmp_path: Path, mechanism: str) -> None:
    store = ScramCredentialStore(tmp_path)
    store.put("alice", mechanism, ScramCredential.from_password(mechanism, "pa,ss=word", 4096))
    client = scramp.ScramClient([mechanism], "alice", "pa,ss=word")
    server = ScramSaslServer(mechanism, store.get)
    first = server.evaluate_response(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(final.decode())  # verifies the server signature
    assert server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "x")])
def test_scram_refuses_bad_credentials(tmp_path: Path, user: str, password: str) -> None:
    store = ScramCredentialStore(tmp_path)
    store.put("alice", "SCRAM-SHA-256", ScramCredential.from_password("SCRAM-SHA-256", "right"))
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    server = ScramSaslServer("SCRAM-SHA-256", store.get)
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        first = server.evaluate_response(client.get_client_first().encode())
        client.set_server_first(first.decode())
        server.evaluate_response(client.get_client_final().encode())
    assert not server.complete


def _jws(claims: dict[str, object]) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def test_oauthbearer_unsecured_token() -> None:
    clock = ManualClock(1_700_000_000_000)
    now_s = clock.milliseconds() // 1000
    server = OAuthBearerSaslServer({"unsecuredValidatorRequiredScope": "kafka"}, clock.milliseconds)
    token = _jws({"sub": "alice", "exp": now_s + 60, "iat": now_s, "scope": ["kafka", "other"]})
    assert server.evaluate_response(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b""
    assert server.authorization_id == "alice"
    assert server.session_expiration_ms == (now_s + 60) * 1000
    invalid = b'{"status":"invalid_token"}'
    # OAuthBearerSaslServer: a bad token gets an error challenge; the client's %x01 then fails the exchange
    for claims, status, reason in [
        ({"sub": "a", "exp": now_s - 1}, invalid, "expired"),
        ({"sub": "a", "exp": now_s}, invalid, "expired"),  # on or after exp (OAuthBearerValidationUtils)
        ({"exp": now_s + 60}, invalid, "sub"),
        ({"sub": " ", "exp": now_s + 60}, invalid, "sub"),
        ({"sub": "a", "exp": now_s + 60, "iat": now_s + 120}, invalid, "issued in the future"),
        ({"sub": "a", "exp": now_s + 60, "scope": "x"}, b'{"status":"insufficient_scope", "scope":"[kafka]"}',
         "scope"),
        # a string scope claim is one scope value, as OAuthBearerUnsecuredJws reads it
        ({"sub": "a", "exp": now_s + 60, "scope": "kafka other"}, b'{"status":"insufficient_scope", '
         b'"scope":"[kafka]"}', "scope"),
    ]:
        server = OAuthBearerSaslServer({"unsecuredValidatorRequiredScope": "kafka"}, clock.milliseconds)
        assert server.evaluate_response(f"n,,\x01auth=Bearer {_jws(claims)}\x01\x01".encode()) == status
        assert not server.complete
        with pytest.raises(SaslAuthenticationError, match=re.escape(status.decode())) as info:
            server.evaluate_response(b"\x01")
        assert info.value.detail is not None and reason in info.value.detail
    assert OAuthBearerSaslServer({}, clock.milliseconds).evaluate_response(
        f"n,,\x01auth=Bearer {_jws({'sub': 'a', 'exp': now_s + 60, 'scope': 'kafka other'})}\x01\x01".encode()) == b""


def test_scram_store_alter_describe_and_reload(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path)
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw", 8192, salt=b"salt-16-bytes-xx")
    import hashlib

    salted = hashlib.pbkdf2_hmac("sha512", b"pw", b"salt-16-bytes-xx", 8192)
    out = store.alter([], [Upsertion("alice", 2, 8192, b"salt-16-bytes-xx", salted), Upsertion("bob", 1, 100, b"s", b"p"),
                           Upsertion("carol", 9, 4096, b"s", b"p")])
    assert out == [("alice", ErrorCode.NONE, None),
                   ("bob", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations: 100"),
                   ("carol", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism type 9")]
    assert store.get("alice", "SCRAM-SHA-512") == cred
    reloaded = ScramCredentialStore(tmp_path)
    assert reloaded.get("alice", "SCRAM-SHA-512") == cred
    assert reloaded.describe(None) == [("alice", ErrorCode.NONE, None, [(2, 8192)])]
    assert reloaded.describe(["zed"])[0][1] == ErrorCode.RESOURCE_NOT_FOUND
    text = (tmp_path / "tidelog-scram-credentials.json").read_text()
    assert "pw" not in text.split('"') and salted.hex() not in text  # neither password nor salted password
    assert reloaded.alter([("alice", 1)], [])[0][1] == ErrorCode.RESOURCE_NOT_FOUND
    assert reloaded.alter([("alice", 2)], [])[0][1] == ErrorCode.NONE
    assert ScramCredentialStore(tmp_path).users() == []


def _handshake(ctx: ssl.SSLContext, ca: ThrowawayCA, client_cert: object = None) -> dict[str, object]:
    """A TLS handshake in memory (no sockets): returns the peer certificate the server saw."""
    client_ctx = ssl.create_default_context(cafile=str(ca.ca_pem))
    if client_cert is not None:
        client_ctx.load_cert_chain(str(client_cert.cert_pem), str(client_cert.key_pem))  # type: ignore[attr-defined]
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    server = ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for obj in (client, server):
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    return {"cert": server.getpeercert(binary_form=True), "version": server.version()}


def _config(tmp_path: Path, **values: str) -> BrokerConfig:
    return BrokerConfig({"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "d"), **values})


def test_ssl_context_pem_keystore_location_and_inline(tmp_path: Path) -> None:
    ca = ThrowawayCA(tmp_path)
    server_cert = ca.issue("localhost", server=True, key_password="kp")
    ctx = create_server_context(_config(tmp_path, **{"ssl.keystore.type": "PEM",
                                                      "ssl.keystore.location": str(server_cert.keystore_pem),
                                                      "ssl.key.password": "kp"}), "SSL")
    assert _handshake(ctx, ca)["version"] == "TLSv1.3"
    inline = create_server_context(_config(tmp_path, **{
        "ssl.keystore.type": "PEM", "ssl.keystore.key": server_cert.key_pem.read_text(),
        "ssl.keystore.certificate.chain": server_cert.cert_pem.read_text(), "ssl.key.password": "kp",
        "ssl.enabled.protocols": "TLSv1.2"}), "SSL")
    assert _handshake(inline, ca)["version"] == "TLSv1.2"
    with pytest.raises(ConfigError, match="ssl.key.password"):
        create_server_context(_config(tmp_path, **{"ssl.keystore.type": "PEM",
                                                    "ssl.keystore.location": str(server_cert.keystore_pem),
                                                    "ssl.key.password": "wrong"}), "SSL")
    with pytest.raises(ConfigError, match="JKS"):
        create_server_context(_config(tmp_path, **{"ssl.keystore.location": str(server_cert.keystore_pem)}), "SSL")


def test_ssl_context_pkcs12_and_required_client_auth(tmp_path: Path) -> None:
    ca = ThrowawayCA(tmp_path)
    ca.issue("localhost", server=True)
    keystore = ca.pkcs12("localhost", "store-pw")
    truststore = ca.truststore_pkcs12("trust-pw")
    ctx = create_server_context(_config(tmp_path, **{
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore), "ssl.keystore.password": "store-pw",
        "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(truststore),
        "ssl.truststore.password": "trust-pw", "ssl.client.auth": "required"}), "SSL")
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    client = ca.issue("app")
    assert _handshake(ctx, ca, client)["cert"]
    with pytest.raises(ConfigError, match="PKCS12"):
        create_server_context(_config(tmp_path, **{
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": "nope"}), "SSL")


@pytest.mark.parametrize(("password", "ok"), [("pw", True), ("wrong", False)])
def test_scram_accepts_repeated_client_nonce_like_kafka(tmp_path: Path, password: str, ok: bool) -> None:
    """librdkafka 2.0.2 (kcat) sends r=<cnonce><cnonce><snonce>; Kafka checks endsWith, so must we."""
    import hashlib
    import hmac

    store = ScramCredentialStore(tmp_path)
    store.put("alice", "SCRAM-SHA-256", ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096))
    server = ScramSaslServer("SCRAM-SHA-256", store.get)
    bare = "n=alice,r=abc"
    first = server.evaluate_response(f"n,,{bare}".encode()).decode()
    attrs = dict(p.split("=", 1) for p in first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    without_proof = f"c=biws,r=abc{attrs['r']}"
    auth = f"{bare},{first},{without_proof}".encode()
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, hashlib.sha256).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    if ok:
        final = server.evaluate_response(f"{without_proof},p={proof}".encode()).decode()
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        assert final == "v=" + base64.b64encode(hmac.new(server_key, auth, hashlib.sha256).digest()).decode()
        assert server.complete
    else:
        with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
            server.evaluate_response(f"{without_proof},p={proof}".encode())
