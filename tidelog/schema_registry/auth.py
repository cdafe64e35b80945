"""HTTP Basic authentication with the broker's own SASL users (issue 32, "Security").

When the broker has a SASL listener, the registry knows the same users: PLAIN ones from that listener's JAAS config
(`user_<name>="<password>"`) and SCRAM ones from the broker's credential store (checked as a SCRAM server would: the
password's salted key against the stored key). Then a write needs valid credentials (401 otherwise), and wrong
credentials are refused on any request; reads without credentials stay open, so deserializers that only fetch
schemas by id keep working. Without a SASL listener the registry is open, as the broker is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading
from typing import Any

from tidelog.clock import Clock
from tidelog.schema_registry.errors import RegistryError
from tidelog.security.scram_store import MECHANISMS, ScramCredential

UNAUTHORIZED = 40101  # Confluent answers 401 with this finer code when credentials are missing or wrong
CACHE_MS = 60_000  # a verified header is trusted this long (PBKDF2 per request would cost ~ms each), unless the
# user's SCRAM credential changes first
CACHE_ENTRIES = 1024


def unauthorized() -> RegistryError:
    return RegistryError(UNAUTHORIZED, "Unauthorized", status=401)


class BasicAuth:
    def __init__(self, security: Any, clock: Clock | None = None) -> None:
        self._security = security  # BrokerSecurity: listeners, scram_store
        self._clock = clock or Clock()
        sasl = [sec for sec in security.listeners.values() if sec.uses_sasl]
        self.enabled = bool(sasl)
        self._plain: dict[str, str] = {}
        self._scram: list[str] = []
        for sec in sasl:
            for mechanism in sec.mechanisms:
                if mechanism == "PLAIN" and "PLAIN" in sec.jaas:
                    options = sec.jaas["PLAIN"].options
                    self._plain.update({k[5:]: v for k, v in options.items() if k.startswith("user_")})
                elif mechanism in MECHANISMS and mechanism not in self._scram:
                    self._scram.append(mechanism)
        # sha256(header) -> (user, trusted until (ms), the SCRAM credential it was checked against, if any)
        self._verified: dict[bytes, tuple[str, int, tuple[str, bytes] | None]] = {}
        self._lock = threading.Lock()

    def principal(self, header: str | None, write: bool) -> str | None:
        """The user a request acts as (None: anonymous); raises 401 for wrong credentials, or none on a write."""
        if not self.enabled:
            return None
        if not header:
            if write:
                raise unauthorized()
            return None
        digest = hashlib.sha256(header.encode("utf-8", "surrogateescape")).digest()
        now = self._clock.monotonic_ms()
        with self._lock:
            cached = self._verified.get(digest)
        if cached is not None and cached[1] > now and self._still_valid(cached[0], cached[2]):
            return cached[0]
        user, credential = self._check(header)
        with self._lock:
            if len(self._verified) >= CACHE_ENTRIES:
                self._verified.clear()
            self._verified[digest] = (user, now + CACHE_MS, credential)
        return user

    def _still_valid(self, user: str, credential: tuple[str, bytes] | None) -> bool:
        """A cached SCRAM login holds only while the user's credential is the one it was checked against (a
        deleted or changed credential ends it at once); PLAIN users come from the static JAAS config."""
        if credential is None:
            return True
        current = self._security.scram_store.get(user, credential[0])
        return current is not None and hmac.compare_digest(current.stored_key, credential[1])

    def _check(self, header: str) -> tuple[str, tuple[str, bytes] | None]:
        """(user, (mechanism, stored key) of the SCRAM credential that matched, or None for a PLAIN user)."""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            raise unauthorized()
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, ValueError):
            raise unauthorized() from None
        if not sep or not user:
            raise unauthorized()
        expected = self._plain.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return user, None
        for mechanism in self._scram:
            credential = self._security.scram_store.get(user, mechanism)
            if credential is not None and _scram_matches(mechanism, credential, password):
                return user, (mechanism, credential.stored_key)
        raise unauthorized()


def _scram_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """RFC 5802: the stored key is H(HMAC(Hi(password, salt, i), "Client Key"))."""
    name = MECHANISMS[mechanism][1]().name
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), credential.salt, credential.iterations)
    derived = ScramCredential.from_salted_password(mechanism, credential.salt, salted, credential.iterations)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)
