"""SASL/OAUTHBEARER (RFC 7628) with Kafka's development-only unsecured token validator
(OAuthBearerUnsecuredValidatorCallbackHandler / OAuthBearerUnsecuredJws): an unsigned JWS (`alg: none`)
whose `sub` claim is the principal and whose `exp` bounds the session. Options from the listener's
`oauthbearer.sasl.jaas.config`: unsecuredValidatorPrincipalClaimName, unsecuredValidatorScopeClaimName,
unsecuredValidatorRequiredScope, unsecuredValidatorAllowableClockSkewMs. Never use it in production."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from tidelog.security.sasl import SaslAuthenticationError

MECHANISM = "OAUTHBEARER"
_CLIENT_FIRST = re.compile(r"^(?:n|y|p=[^,]*),(?:a=([^,]*))?,\x01((?:[^\x01]*\x01)*)\x01$", re.S)


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        doc = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, TypeError) as exc:
        raise SaslAuthenticationError("Authentication failed: the token is not an unsecured JWS") from exc
    if not isinstance(doc, dict):
        raise SaslAuthenticationError("Authentication failed: the token is not an unsecured JWS")
    return doc


class OAuthBearerSaslServer:
    mechanism = MECHANISM

    def __init__(self, options: dict[str, str], now_ms: Callable[[], int]) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required_scope = [s for s in options.get("unsecuredValidatorRequiredScope", "").split() if s]
        try:
            self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        except ValueError:
            self._skew_ms = 0
        self._now_ms = now_ms
        self.complete = False
        self.authorization_id = ""
        self.session_expiration_ms: int | None = None

    def evaluate_response(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("Authentication failed: OAUTHBEARER exchange already completed")
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
        principal, exp_ms = self._validate(auth[len("Bearer "):].strip())
        if authzid and authzid != principal:
            raise SaslAuthenticationError("Authentication failed: authorization id differs from the token principal")
        self.authorization_id = principal
        self.session_expiration_ms = exp_ms
        self.complete = True
        return b""

    def _validate(self, jws: str) -> tuple[str, int]:
        parts = jws.split(".")
        if len(parts) != 3 or parts[2]:
            raise SaslAuthenticationError("Authentication failed: the token is not an unsecured JWS (3 parts, "
                                          "empty signature)")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if header.get("alg") != "none":
            raise SaslAuthenticationError("Authentication failed: unsecured JWS must have alg none")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal:
            raise SaslAuthenticationError(f"Authentication failed: no string claim {self._principal_claim}")
        exp, iat = claims.get("exp"), claims.get("iat")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise SaslAuthenticationError("Authentication failed: the token has no numeric exp claim")
        now = self._now_ms()
        exp_ms = int(exp * 1000)
        if now - self._skew_ms >= exp_ms:
            raise SaslAuthenticationError("Authentication failed: the token has expired")
        if iat is not None:
            if not isinstance(iat, (int, float)) or isinstance(iat, bool):
                raise SaslAuthenticationError("Authentication failed: iat claim is not a number")
            if int(iat * 1000) > now + self._skew_ms:
                raise SaslAuthenticationError("Authentication failed: the token was issued in the future")
            if int(iat * 1000) > exp_ms:
                raise SaslAuthenticationError("Authentication failed: the token expires before it was issued")
        if self._required_scope:
            scope = claims.get(self._scope_claim)
            granted = scope.split() if isinstance(scope, str) else scope if isinstance(scope, list) else []
            missing = [s for s in self._required_scope if s not in granted]
            if missing:
                raise SaslAuthenticationError(f"Authentication failed: the token lacks the required scope {missing}")
        return principal, exp_ms
