"""The stdlib SSLContext of a TLS listener from Kafka's `ssl.*` configs (listener overrides first).

Keystores: `PEM` (KIP-651: `ssl.keystore.location` holding the private key and certificate chain, or inline
`ssl.keystore.key` + `ssl.keystore.certificate.chain`; `ssl.key.password` for an encrypted key) and `PKCS12`
(read with `cryptography`). JKS is Java-only: convert it with
`keytool -importkeystore -srckeystore k.jks -destkeystore k.p12 -deststoretype PKCS12`.
Truststores (client certificates): PEM (file or inline `ssl.truststore.certificates`) or PKCS12.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509 import load_pem_x509_certificates

from tidelog.config.definitions import ConfigError
from tidelog.security.listener_config import listener_value

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
                 "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _password(value: Any) -> bytes | None:
    return None if value in (None, "") else str(value).encode("utf-8")


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"Cannot read {what} {path}: {exc.strerror}") from exc


def _pkcs12(data: bytes, password: bytes | None, what: str) -> Any:
    try:
        return pkcs12.load_pkcs12(data, password)
    except ValueError as exc:
        raise ConfigError(f"Cannot load the PKCS12 {what} (wrong password or not PKCS12)") from exc


def _load_pem_key_and_chain(ctx: ssl.SSLContext, pem: bytes, key_password: bytes | None) -> None:
    """load_cert_chain only reads files: write key and chain to a private temporary file, with the key
    re-encrypted under a one-time password so no plaintext key touches the disk, and remove it at once."""
    try:
        key = serialization.load_pem_private_key(pem, key_password)
    except (ValueError, TypeError) as exc:
        raise ConfigError("Cannot load the keystore private key (missing, wrong ssl.key.password or not PEM)") from exc
    try:
        chain = load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise ConfigError("The keystore holds no PEM certificate chain") from exc
    _load_key_objects(ctx, key, chain)


def _load_key_objects(ctx: ssl.SSLContext, key: Any, chain: list[Any]) -> None:
    if key is None or not chain:
        raise ConfigError("The keystore must hold a private key and its certificate chain")
    one_time = secrets.token_urlsafe(24).encode()
    body = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(one_time))
    body += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    fd, path = tempfile.mkstemp(prefix="tidelog-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        ctx.load_cert_chain(path, password=one_time)
    finally:
        os.unlink(path)


def _load_keystore(ctx: ssl.SSLContext, get: Any) -> None:
    kind = str(get("ssl.keystore.type") or "JKS").upper()
    location = get("ssl.keystore.location")
    key_password = _password(get("ssl.key.password"))
    if kind == "PEM":
        inline_key, inline_chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
        if inline_key or inline_chain:
            if location:
                raise ConfigError("ssl.keystore.location cannot be combined with ssl.keystore.key/certificate.chain")
            pem = f"{inline_key}\n{inline_chain}".encode()
        elif location:
            pem = _read(location, "keystore")
        else:
            raise ConfigError("A TLS listener needs ssl.keystore.location or ssl.keystore.key")
        _load_pem_key_and_chain(ctx, pem, key_password)
    elif kind == "PKCS12":
        if not location:
            raise ConfigError("ssl.keystore.type=PKCS12 needs ssl.keystore.location")
        store = _pkcs12(_read(location, "keystore"), _password(get("ssl.keystore.password")), "keystore")
        chain = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
        _load_key_objects(ctx, store.key, chain)
    else:
        raise ConfigError(f"ssl.keystore.type {kind} is not supported: use PEM or PKCS12 (convert JKS with "
                          "keytool -importkeystore ... -deststoretype PKCS12)")


def _load_truststore(ctx: ssl.SSLContext, get: Any) -> bool:
    """Trusted CAs for client certificates; False when none is configured."""
    kind = str(get("ssl.truststore.type") or "JKS").upper()
    location = get("ssl.truststore.location")
    inline = get("ssl.truststore.certificates")
    if kind == "PEM":
        if inline:
            ctx.load_verify_locations(cadata=str(inline))
            return True
        if location:
            ctx.load_verify_locations(cadata=_read(location, "truststore").decode("ascii", "replace"))
            return True
        return False
    if not location:
        return False
    if kind != "PKCS12":
        raise ConfigError(f"ssl.truststore.type {kind} is not supported: use PEM or PKCS12")
    store = _pkcs12(_read(location, "truststore"), _password(get("ssl.truststore.password")), "truststore")
    certs = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
    if not certs:
        raise ConfigError("The PKCS12 truststore holds no certificate")
    ctx.load_verify_locations(cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
    return True


def _openssl_cipher(name: str) -> str | None:
    """An IANA/Java suite name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) as OpenSSL's; None for TLS 1.3 suites
    (the stdlib cannot restrict those)."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return None if name.startswith("TLS_") else name
    kex, cipher = name[4:].split("_WITH_", 1)
    kex = "" if kex == "RSA" else kex.replace("_", "-") + "-"
    cipher = (cipher.replace("AES_128_", "AES128-").replace("AES_256_", "AES256-")
              .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305").replace("_", "-"))
    cipher = cipher.replace("CBC-", "")
    return kex + cipher


def _ssl_reason(exc: ssl.SSLError) -> str:
    """OpenSSL's reason ("CA_MD_TOO_WEAK", "KEY_VALUES_MISMATCH"), else the message: one line."""
    return str(exc.reason or exc.strerror or exc).splitlines()[0]


def create_server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The SSLContext of `listener`; ConfigError with a message naming the config on any problem."""

    def get(name: str) -> Any:
        return listener_value(config, listener, name)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_TLS_VERSIONS[v] for v in get("ssl.enabled.protocols") or [] if v in _TLS_VERSIONS]
    if not versions:
        raise ConfigError("ssl.enabled.protocols names no supported TLS version (TLSv1.2, TLSv1.3)")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    suites = [c for c in (_openssl_cipher(s.strip()) for s in get("ssl.cipher.suites") or []) if c]
    if suites:
        try:
            ctx.set_ciphers(":".join(suites))
        except ssl.SSLError as exc:
            raise ConfigError(f"ssl.cipher.suites names no usable cipher suite: {suites}") from exc
    try:
        _load_keystore(ctx, get)
    except ssl.SSLError as exc:
        raise ConfigError(f"The keystore of listener {listener} cannot be used: {_ssl_reason(exc)}") from exc
    client_auth = str(get("ssl.client.auth") or "none").lower()
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    try:
        if client_auth != "none" and not _load_truststore(ctx, get):
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    except ssl.SSLError as exc:  # e.g. a certificate OpenSSL refuses (a SHA-1 signature at security level 2)
        raise ConfigError(f"The truststore of listener {listener} cannot be used: {_ssl_reason(exc)}") from exc
    return ctx
