"""A connection's authentication phase (Kafka's SslTransportLayer handshake + SaslServerAuthenticator).

TLS listeners: the handshake runs first (`start`), and an SSL listener's principal is the client certificate's
DN mapped by ssl.principal.mapping.rules. SASL listeners (KIP-152): ApiVersions, then SaslHandshake, then the
mechanism's tokens in SaslAuthenticate requests (v1 handshake) or as bare size-prefixed frames (v0); any other
request first is ILLEGAL_SASL_STATE and closes the connection. A failed authentication answers with Kafka's
error, waits connection.failed.authentication.delay.ms and closes, logging one line without secrets.
KIP-368: with connections.max.reauth.ms (or an expiring OAUTHBEARER token) the session has a lifetime; a
request other than SaslHandshake after it closes the connection, a re-authentication renews it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Any

from tidelog.protocol.errors import CloseConnection, ErrorCode
from tidelog.protocol.wire import Piece
from tidelog.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal, distinguished_name
from tidelog.security.sasl import SaslAuthenticationError, SaslServer

# What the dispatch answers a request with: (frame pieces, frame size, api name, error code).
Answer = tuple[list[Piece], int, str, int | None]

if TYPE_CHECKING:
    from tidelog.security.listener_config import ListenerSecurity
    from tidelog.security.manager import BrokerSecurity

log = logging.getLogger("tidelog.security.authenticator")

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
_INT32 = struct.Struct(">i")


class Session:
    """What a connection knows about its client's identity (`ctx.session` in handlers)."""

    def __init__(self, security: BrokerSecurity, listener: ListenerSecurity) -> None:
        self.security = security
        self.listener = listener
        self.principal: KafkaPrincipal = ANONYMOUS
        self.authenticated = not listener.uses_sasl
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self._raw_tokens = False  # after SaslHandshake v0: bare size-prefixed tokens (no Kafka header)
        self._expires_ms: int | None = None  # monotonic deadline of the session (KIP-368)
        self._failure: str | None = None  # set by a handler: answer, delay, then close
        self.peer = ""

    # --- TLS ---

    async def start(self, peer: str, ssl_object: Any) -> bool:
        """After the TLS handshake (done by the listener, tidelog.security.tls): an SSL listener's principal is
        the client certificate's DN mapped by ssl.principal.mapping.rules. False (logged) to close."""
        self.peer = peer
        if self.listener.protocol == "SSL":
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            if der:
                dn = distinguished_name(der)
                try:
                    self.principal = KafkaPrincipal(USER_TYPE, self.security.principal_mapper(self.listener.name)
                                                    .get_name(dn))
                except ValueError:
                    log.info("Closing connection from %s: no ssl.principal.mapping.rules rule applies to the "
                             "client certificate %s", peer, dn)
                    return False
        return True

    # --- request gate (the dispatch's authenticate step, broker/dispatch.py) ---

    async def admit(self, frame: memoryview) -> Answer | None:
        """Before a request is dispatched: None admits it; a bare SASL token (after SaslHandshake v0) is
        answered here; a request the SASL state does not allow raises CloseConnection."""
        if self.authenticated and (self._expires_ms is None
                                   or self.security.clock.monotonic_ms() < self._expires_ms):
            return None
        if self._raw_tokens:
            return await self._raw_token(bytes(frame))
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if self.authenticated:  # expired (KIP-368): only a re-authentication may follow
            if api_key != SASL_HANDSHAKE:
                raise CloseConnection(f"SASL session of {self.principal} expired (connections.max.reauth.ms); "
                                      "the client did not re-authenticate")
        elif api_key not in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            # SaslServerAuthenticator: IllegalSaslStateException, the channel is closed without a response.
            raise CloseConnection(f"ILLEGAL_SASL_STATE: request with api key {api_key} before SASL authentication "
                                  f"on listener {self.listener.name}")
        return None

    async def after_request(self, answer: list[Piece] | None) -> None:
        """After a request is answered: a failed (re-)authentication waits connection.failed.authentication
        .delay.ms, then closes the connection once its answer is written (CloseConnection.answer)."""
        if self._failure is None:
            return
        reason, self._failure = self._failure, None
        delay_ms = self.listener.failed_auth_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)
        raise CloseConnection(reason or "authentication failed", answer=answer)

    # --- called by the SaslHandshake / SaslAuthenticate handlers ---

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, list[str]]:
        enabled = list(self.listener.mechanisms)
        if self.authenticated and self._expires_ms is None and not self._raw_tokens:
            return ErrorCode.ILLEGAL_SASL_STATE, enabled  # authenticated for good: nothing to renew
        if self._server is not None and not self._server.complete and self.mechanism is not None:
            self._failure = "ILLEGAL_SASL_STATE: SaslHandshake during an authentication exchange"
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        if mechanism not in enabled:
            # the requested name is not logged: a misconfigured client may have put a secret there
            self._failure = f"UNSUPPORTED_SASL_MECHANISM: client asked for a mechanism not enabled ({enabled})"
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        if self.authenticated and mechanism != self.mechanism:
            self._failure = "re-authentication must use the mechanism of the first authentication (KIP-368)"
            return ErrorCode.ILLEGAL_SASL_STATE, enabled
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self._raw_tokens = version == 0
        return ErrorCode.NONE, enabled

    def _new_server(self, mechanism: str) -> SaslServer:
        jaas = self.listener.jaas.get(mechanism)
        options = jaas.options if jaas is not None else {}
        if mechanism == "PLAIN":
            from tidelog.security.sasl.plain import PlainSaslServer

            return PlainSaslServer.from_jaas_options(options)
        if mechanism.startswith("SCRAM-"):
            from tidelog.security.sasl.scram import ScramSaslServer

            return ScramSaslServer(mechanism, self.security.scram_store.get)
        from tidelog.security.sasl.oauthbearer import OAuthBearerSaslServer

        return OAuthBearerSaslServer(options, self.security.clock.milliseconds)

    def authenticate(self, token: bytes) -> tuple[ErrorCode, str | None, bytes, int]:
        """One SaslAuthenticate token: (error, message, challenge, session lifetime ms)."""
        if self._server is None or self._server.complete or self._raw_tokens:
            what = "after successful authentication" if self.authenticated else "before SaslHandshake"
            self._failure = f"ILLEGAL_SASL_STATE: SaslAuthenticate {what}"
            return ErrorCode.ILLEGAL_SASL_STATE, f"Unexpected SaslAuthenticate request {what}", b"", 0
        return self._evaluate(token)

    def _evaluate(self, token: bytes) -> tuple[ErrorCode, str | None, bytes, int]:
        server = self._server
        assert server is not None
        try:
            challenge = server.evaluate_response(token)
        except SaslAuthenticationError as exc:
            message = str(exc)
            self._failure = f"failed authentication with mechanism {server.mechanism}: {exc.detail or message}"
            return ErrorCode.SASL_AUTHENTICATION_FAILED, message, b"", 0
        except Exception as exc:  # noqa: BLE001 - a mechanism bug on hostile input fails this client only
            self._failure = f"failed authentication with mechanism {server.mechanism}: {type(exc).__name__}"
            return ErrorCode.SASL_AUTHENTICATION_FAILED, "Authentication failed", b"", 0
        lifetime = 0
        if server.complete:
            lifetime = self._complete(server)
            if lifetime < 0:
                return ErrorCode.SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication", b"", 0
        return ErrorCode.NONE, None, challenge, lifetime

    def _complete(self, server: SaslServer) -> int:
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self.authenticated and principal != self.principal:
            self._failure = "re-authentication changed the principal (KIP-368 forbids it)"
            return -1
        self.principal = principal
        self.authenticated = True
        # SaslServerAuthenticator.calcCompletionTimesAndReturnSessionLifetimeMs
        lifetime: int | None = self.listener.reauth_ms or None
        if server.session_expiration_ms is not None:
            remaining = max(0, server.session_expiration_ms - self.security.clock.milliseconds())
            lifetime = remaining if lifetime is None else min(lifetime, remaining)
        self._expires_ms = None if lifetime is None else self.security.clock.monotonic_ms() + lifetime
        return lifetime or 0

    async def _raw_token(self, token: bytes) -> Answer:
        """A bare token after SaslHandshake v0 (clients before KIP-152): answered with a bare frame."""
        if self._server is None or self._server.complete:
            raise CloseConnection("ILLEGAL_SASL_STATE: unexpected SASL token")
        error, message, challenge, _ = self._evaluate(token)
        if error != ErrorCode.NONE:
            reason, self._failure = self._failure or f"failed authentication: {message}", None
            if self.listener.failed_auth_delay_ms > 0:
                await asyncio.sleep(self.listener.failed_auth_delay_ms / 1000)
            raise CloseConnection(f"{reason} (SaslHandshake v0)")
        if self._server is not None and self._server.complete:
            self._raw_tokens = False
        frame = _INT32.pack(len(challenge)) + challenge
        return [frame], len(frame), "sasl_token", None


