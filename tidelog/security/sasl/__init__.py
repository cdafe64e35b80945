"""SASL mechanism servers (Kafka's SaslServer implementations): PLAIN, SCRAM-SHA-256/512, OAUTHBEARER.

Each takes client tokens through `evaluate_response(token) -> challenge` until `complete`; a refused or
malformed token raises SaslAuthenticationError, whose message is safe to send and log (never a secret)."""

from __future__ import annotations

from typing import Protocol


class SaslAuthenticationError(Exception):
    """Authentication failed: the message goes into SaslAuthenticate's error_message and the log, or `detail`
    (why, for the operator; never a secret either) into the log when the client's message says less."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str
    session_expiration_ms: int | None  # wall-clock ms the credential expires (OAUTHBEARER token exp), if any

    def evaluate_response(self, token: bytes) -> bytes: ...
