"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer, users from the listener's JAAS config
(`PlainLoginModule required user_<name>="<password>";`)."""

from __future__ import annotations

import hmac

from tidelog.security.sasl import SaslAuthenticationError

MECHANISM = "PLAIN"


class PlainSaslServer:
    mechanism = MECHANISM

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users  # name -> password, from the JAAS options user_<name>
        self.complete = False
        self.authorization_id = ""
        self.session_expiration_ms: int | None = None

    @classmethod
    def from_jaas_options(cls, options: dict[str, str]) -> PlainSaslServer:
        return cls({k[5:]: v for k, v in options.items() if k.startswith("user_")})

    def evaluate_response(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: PLAIN exchange already completed")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError as exc:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from exc
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare in constant time, and also for unknown users, so timing does not reveal which names exist.
        ok = hmac.compare_digest((expected or "\x00unknown").encode(), password.encode()) and expected is not None
        if not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        self.authorization_id = username
        self.complete = True
        return b""
