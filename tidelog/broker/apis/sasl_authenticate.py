"""SaslAuthenticate (key 36, KIP-152): one SASL token each way; v1+ carries the session lifetime (KIP-368).
A failure answers SASL_AUTHENTICATION_FAILED with a message, then the connection closes
(tidelog.security.authenticator)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode

API_KEY = 36
NOTES = """SASL_AUTHENTICATION_FAILED with Kafka's message, then the connection closes (after
`connection.failed.authentication.delay.ms`); v1+ `session_lifetime_ms` from `connections.max.reauth.ms` /
token expiry"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    if session is None or not session.listener.uses_sasl:
        error, message, challenge, lifetime = (ErrorCode.ILLEGAL_SASL_STATE,
                                               "SaslAuthenticate on a listener without SASL", b"", 0)
    else:
        error, message, challenge, lifetime = session.authenticate(bytes(request.auth_bytes or b""))
    fields: dict[str, Any] = {"error_code": error, "error_message": message, "auth_bytes": challenge}
    if ctx.api_version >= 1:
        fields["session_lifetime_ms"] = lifetime
    return response_cls(ctx)(**fields)
