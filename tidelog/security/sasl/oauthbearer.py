"""SASL/OAUTHBEARER (RFC 7628) with Kafka's development-only unsecured token validator
(OAuthBearerUnsecuredValidatorCallbackHandler / OAuthBearerUnsecuredJws): an unsigned JWS (`alg: none`)
whose `sub` claim is the principal and whose `exp` bounds the session. Options from the listener's
`oauthbearer.sasl.jaas.config`: unsecuredValidatorPrincipalClaimName, unsecuredValidatorScopeClaimName,
unsecuredValidatorRequiredScope, unsecuredValidatorAllowableClockSkewMs. Never use it in production.

A token that fails validation is answered as Kafka's OAuthBearerSaslServer answers it (RFC 7628 3.2.2): a
server challenge `{"status":"invalid_token"}` (or `insufficient_scope` with the required scope), then, once the
client acknowledges with %x01, SASL_AUTHENTICATION_FAILED carrying that JSON. The reason is only logged."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from tidelog.security.sasl import SaslAuthenticationError

MECHANISM = "OAUTHBEARER"
_CLIENT_FIRST = re.compile(r"^(?:n|y|p=[^,]*),(?:a=([^,]*))?,\x01((?:[^\x01]*\x01)*)\x01$", re.S)


class _IllegalToken(Exception):
    """Kafka's OAuthBearerIllegalTokenException: the reason (logged) and, for a scope failure, the required scope."""

    def __init__(self, reason: str, required_scope: list[str] | None = None) -> None:
        super().__init__(reason)
        self.required_scope = required_scope


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, TypeError) as exc:
        raise _IllegalToken("the token is not an unsecured JWS (malformed Base64 URL or JSON)") from exc
    if not isinstance(doc, dict):
        raise _IllegalToken("the token is not an unsecured JWS (a part is not a JSON object)")
    return doc


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise _IllegalToken(f"the '{name}' claim is not a number")
    return float(value)


def _scope(claims: dict[str, Any], name: str) -> set[str]:
    # OAuthBearerUnsecuredJws.calculateScope: a string claim is ONE scope value (not split), a list is the scopes.
    value = claims.get(name)
    if value is None:
        return set()
    if isinstance(value, str):
        return {value.strip()} if value.strip() else set()
    if isinstance(value, list):
        return {str(v).strip() for v in value if str(v).strip()}
    raise _IllegalToken(f"the '{name}' claim is neither a string nor a list")


class OAuthBearerSaslServer:
    mechanism = MECHANISM

    def __init__(self, options: dict[str, str], now_ms: Callable[[], int]) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self._required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        try:
            self._skew_ms = max(0, int(options.get("unsecuredValidatorAllowableClockSkewMs", "0").strip() or 0))
        except ValueError:
            self._skew_ms = 0
        self._now_ms = now_ms
        self._error: tuple[str, str] | None = None  # (JSON sent to the client, reason logged) after a bad token
        self.complete = False
        self.authorization_id = ""
        self.session_expiration_ms: int | None = None

    def evaluate_response(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: OAUTHBEARER exchange already completed")
        if token == b"\x01" and self._error is not None:  # the client acknowledged our error challenge
            status, reason = self._error
            raise SaslAuthenticationError(status, detail=f"Authentication failed: {reason}")
        self._error = None
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SaslAuthenticationError("Authentication failed: OAUTHBEARER message is not UTF-8") from exc
        m = _CLIENT_FIRST.match(text)
        if m is None:
            raise SaslAuthenticationError("Authentication failed: invalid OAUTHBEARER client first message")
        authzid = m.group(1) or ""
        pairs = dict(kv.split("=", 1) for kv in m.group(2).split("\x01") if "=" in kv)
        auth = pairs.get("auth", "")
        if not auth.startswith("Bearer "):
            raise SaslAuthenticationError("Authentication failed: no Bearer token in the auth value")
        try:
            principal, exp_ms = self._validate(auth[len("Bearer "):].strip())
        except _IllegalToken as exc:
            # OAuthBearerUnsecuredValidatorCallbackHandler: a scope failure is insufficient_scope, else invalid_token
            if exc.required_scope is None:
                status = '{"status":"invalid_token"}'
            else:
                required = ", ".join(exc.required_scope)  # Java's List.toString, as Kafka sends it
                status = '{"status":"insufficient_scope", "scope":"[' + required + ']"}'
            self._error = (status, str(exc))
            return status.encode()
        if authzid and authzid != principal:
            raise SaslAuthenticationError("Authentication failed: authorization id differs from the token principal")
        self.authorization_id = principal
        self.session_expiration_ms = exp_ms
        self.complete = True
        return b""

    def _validate(self, jws: str) -> tuple[str, int]:
        """OAuthBearerUnsecuredValidatorCallbackHandler.handleCallback's checks, in its order."""
        parts = jws.split(".")
        if len(parts) != 3 or parts[2]:
            raise _IllegalToken("the token is not an unsecured JWS (3 parts, empty signature)")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none":
            raise _IllegalToken("unsecured JWS must have alg none")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise _IllegalToken(f"no string claim {self._principal_claim}")
        exp, iat = _number(claims, "exp"), _number(claims, "iat")
        scope = _scope(claims, self._scope_claim)
        now = self._now_ms()
        if iat is not None and iat * 1000 > now + self._skew_ms:
            raise _IllegalToken("the token was issued in the future (iat)")
        if exp is None:
            raise _IllegalToken("the token has no exp claim")
        if now - self._skew_ms >= exp * 1000:
            raise _IllegalToken("the token has expired")
        if iat is not None and exp <= iat:
            raise _IllegalToken("the token expires before it was issued")
        missing = [s for s in self._required_scope if s not in scope]
        if missing:
            raise _IllegalToken(f"the token lacks the required scope {missing}", self._required_scope)
        return principal, round(exp * 1000)
