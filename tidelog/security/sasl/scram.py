"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677) as Kafka's ScramSaslServer, on the maintained `scramp`
library (message parsing, nonces, proofs, constant-time checks) with credentials from ScramCredentialStore."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable

import scramp
import scramp.core

from tidelog.security.sasl import SaslAuthenticationError
from tidelog.security.scram_store import ScramCredential

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISM_DIGESTS = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
_FAILED = "Authentication failed: Invalid user credentials"


class _UnknownUser(Exception):
    pass


class _AnySalt(scramp.core.Salt):  # type: ignore[misc]
    """A salt of any non-empty length: Kafka's ScramCredential takes whatever salt AlterUserScramCredentials
    stored (confluent-kafka's tests use 8 bytes), where scramp insists on RFC 7677's 12."""

    MIN_LENGTH = 1


class _KafkaAuthFn:
    """scramp's AuthFn (the credential lookup the server calls with the client-first user), with `_AnySalt`.
    A lookup that raises becomes the ScramException scramp's own wrapper raises."""

    def __init__(self, lookup: Callable[[str], tuple[bytes, bytes, bytes, int]]) -> None:
        self._lookup = lookup

    def __call__(self, username: object) -> tuple[scramp.core.Salt, bytes, bytes, scramp.core.IterationCount]:
        try:
            salt, stored_key, server_key, iterations = self._lookup(str(username))
        except Exception as exc:  # noqa: BLE001 - as scramp.core.AuthFn: the caller sees a ScramException
            raise scramp.ScramException("auth_fn exception", scramp.core.ServerError.NO_RESOURCES) from exc
        return _AnySalt(salt), stored_key, server_key, scramp.core.IterationCount(iterations)


class ScramSaslServer:
    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential | None]) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self.complete = False
        self.authorization_id = ""
        self.session_expiration_ms: int | None = None
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._server.auth_fn = _KafkaAuthFn(self._auth_info)  # salts under 12 bytes too, as Kafka
        self._step = 0
        self._username = ""
        self._unknown_user = False

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._lookup(username, self.mechanism)
        if credential is None:
            self._unknown_user = True  # scramp wraps what this raises into a ScramException
            raise _UnknownUser()
        self._username = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate_response(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SaslAuthenticationError("Authentication failed: SCRAM message is not UTF-8") from exc
        try:
            if self._step == 0:
                self._step = 1
                if "tokenauth=true" in text.split(","):
                    raise SaslAuthenticationError("Authentication failed: delegation tokens are not supported")
                self._server.set_client_first(text)
                gs2_authzid = text.split(",", 2)[1] if text.count(",") >= 2 else ""
                if gs2_authzid and gs2_authzid[2:] != self._username:
                    raise SaslAuthenticationError("Authentication failed: Invalid user credentials "
                                                  "(authorization id differs from the user name)")
                return str(self._server.get_server_first()).encode("utf-8")
            if self._step == 1:
                self._step = 2
                try:
                    self._server.set_client_final(text)
                    final = str(self._server.get_server_final())
                except scramp.ScramException as exc:
                    if "nonce" not in str(exc).lower():
                        raise
                    final = self._kafka_lenient_final(text)
                self.authorization_id = self._username
                self.complete = True
                return final.encode("utf-8")
        except _UnknownUser as exc:
            raise SaslAuthenticationError(_FAILED) from exc
        except scramp.ScramException as exc:
            # A fixed message: nothing the client sent (which may hold a secret) is echoed or logged.
            raise SaslAuthenticationError(_FAILED if self._unknown_user or "key" in str(exc).lower() else
                                          "Authentication failed: malformed SCRAM message") from exc
        except (ValueError, TypeError, IndexError) as exc:
            raise SaslAuthenticationError("Authentication failed: malformed SCRAM message") from exc
        raise SaslAuthenticationError("Authentication failed: unexpected SCRAM message after completion")

    def _kafka_lenient_final(self, text: str) -> str:
        """Kafka's ScramSaslServer accepts a client-final nonce that only *ends with* the server-first nonce;
        librdkafka < 2.x (e.g. kcat 1.7 / librdkafka 2.0.2) repeats the client nonce there. scramp insists on
        equality (RFC 5802), so this one case is verified here: the proof over the message as sent."""
        srv = self._server
        attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        without_proof, sep, _ = text.rpartition(",p=")
        if not sep or not attrs.get("r", "").endswith(str(srv.nonce)):
            raise SaslAuthenticationError(_FAILED)
        digest = MECHANISM_DIGESTS[self.mechanism]
        auth_message = ",".join((str(srv.client_first_bare), str(srv.server_first), without_proof)).encode()
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except (ValueError, KeyError) as exc:
            raise SaslAuthenticationError(_FAILED) from exc
        client_signature = hmac.new(srv.stored_key, auth_message, digest).digest()
        if len(proof) != len(client_signature):
            raise SaslAuthenticationError(_FAILED)
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        if not hmac.compare_digest(digest(client_key).digest(), srv.stored_key):
            raise SaslAuthenticationError(_FAILED)
        server_signature = hmac.new(srv.server_key, auth_message, digest).digest()
        return "v=" + base64.b64encode(server_signature).decode()
