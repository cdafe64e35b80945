"""SaslHandshake (key 17, KIP-43/KIP-152): choose the SASL mechanism (tidelog.security.authenticator).
v0 is followed by bare tokens, v1 by SaslAuthenticate requests. On a listener without SASL, or once
authenticated for good, Kafka answers ILLEGAL_SASL_STATE."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode

API_KEY = 17
NOTES = """PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (unsecured JWS validator) per `sasl.enabled.mechanisms`; v0
is followed by bare tokens (pre-KIP-152 clients); ILLEGAL_SASL_STATE on a listener without SASL or after
authentication (unless re-authenticating, KIP-368)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    if session is None or not session.listener.uses_sasl:
        error, mechanisms = ErrorCode.ILLEGAL_SASL_STATE, []
    else:
        error, mechanisms = session.handshake(request.mechanism or "", ctx.api_version)
    return response_cls(ctx)(error_code=error, mechanisms=mechanisms)
