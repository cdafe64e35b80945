"""SCRAM credentials (Kafka's ScramCredential: salt, StoredKey, ServerKey, iterations per user and mechanism),
managed by AlterUserScramCredentials / DescribeUserScramCredentials (KIP-554) and kept in
`<first log dir>/tidelog-scram-credentials.json` (atomic replace). Passwords are never stored: clients send
the salted password, of which only StoredKey and ServerKey (RFC 5802) are kept."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelog.metadata.files import SCRAM_CREDENTIALS
from tidelog.protocol.errors import ErrorCode

FILE_NAME = SCRAM_CREDENTIALS.name

# Kafka's ScramMechanism: type id on the wire, hash.
MECHANISMS: dict[str, tuple[int, Any]] = {"SCRAM-SHA-256": (1, hashlib.sha256), "SCRAM-SHA-512": (2, hashlib.sha512)}
MECHANISM_BY_TYPE = {type_id: name for name, (type_id, _) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # ScramControlManager: the largest iteration count accepted


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted_password: bytes,
                             iterations: int) -> ScramCredential:
        digest = MECHANISMS[mechanism][1]
        client_key = hmac.new(salted_password, b"Client Key", digest).digest()
        server_key = hmac.new(salted_password, b"Server Key", digest).digest()
        return cls(salt, digest(client_key).digest(), server_key, iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        """For tests and tools: the credential a client's password gives (Hi = PBKDF2, RFC 5802)."""
        salt = salt if salt is not None else os.urandom(32)
        name = MECHANISMS[mechanism][1]().name
        salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def to_json(self) -> dict[str, Any]:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ScramCredential:
        b64 = base64.b64decode
        return cls(b64(doc["salt"]), b64(doc["stored_key"]), b64(doc["server_key"]), int(doc["iterations"]))


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class ScramCredentialStore:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = SCRAM_CREDENTIALS.path(directory)
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = SCRAM_CREDENTIALS.read(directory, lambda doc: {
            user: {mech: ScramCredential.from_json(c) for mech, c in mechs.items()}
            for user, mechs in doc.get("users", {}).items()
        }) or {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._users)

    def put(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        with self._lock:
            self._users.setdefault(user, {})[mechanism] = credential
            self._save()

    def describe(self, users: list[str] | None) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
        """(user, error, message, [(mechanism type, iterations)]) per user (all users when None), as Kafka's
        DescribeUserScramCredentials: unknown users RESOURCE_NOT_FOUND, repeated ones DUPLICATE_RESOURCE."""
        if users is None:
            users = self.users()
        seen: dict[str, int] = {}
        for u in users:
            seen[u] = seen.get(u, 0) + 1
        out: list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]] = []
        for user in dict.fromkeys(users):
            if seen[user] > 1:
                out.append((user, ErrorCode.DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the same "
                            f"user twice in a single request: {user}", []))
                continue
            mechs = self._users.get(user)
            if not mechs:
                out.append((user, ErrorCode.RESOURCE_NOT_FOUND,
                            f"Attempt to describe a user credential that does not exist: {user}", []))
                continue
            out.append((user, ErrorCode.NONE, None,
                        [(MECHANISMS[m][0], c.iterations) for m, c in sorted(mechs.items())]))
        return out

    def alter(self, deletions: list[tuple[str, int]], upsertions: list[Upsertion]) -> list[tuple[str, ErrorCode, str | None]]:
        """Apply deletions and upsertions (per-user all-or-nothing, as Kafka's ScramControlManager validates
        each user's alterations) and persist; (user, error, message) per user in request order."""
        errors: dict[str, tuple[ErrorCode, str]] = {}
        per_user: dict[str, list[tuple[str, int]]] = {}
        order: list[str] = []

        def note(user: str) -> None:
            if user not in per_user:
                per_user[user] = []
                order.append(user)

        def fail(user: str, code: ErrorCode, message: str) -> None:
            errors.setdefault(user, (code, message))

        for user, mech_type in deletions:
            note(user)
            per_user[user].append(("delete", mech_type))
        for up in upsertions:
            note(up.user)
            per_user[up.user].append(("upsert", up.mechanism))
        for user, ops in per_user.items():
            if not user:
                fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            mechs = [m for _, m in ops]
            if len(set(mechs)) != len(mechs):
                fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
            for kind, mech in ops:
                if mech not in MECHANISM_BY_TYPE:
                    fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism type {mech}")
                elif kind == "delete" and self.get(user, MECHANISM_BY_TYPE[mech]) is None:
                    fail(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        for up in upsertions:
            if up.iterations < MIN_ITERATIONS:
                fail(up.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations: {up.iterations}")
            elif up.iterations > MAX_ITERATIONS:
                fail(up.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations: {up.iterations}")
            elif not up.salt or not up.salted_password:
                fail(up.user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        with self._lock:
            changed = False
            for user, mech_type in deletions:
                if user not in errors:
                    self._users.get(user, {}).pop(MECHANISM_BY_TYPE[mech_type], None)
                    if user in self._users and not self._users[user]:
                        del self._users[user]
                    changed = True
            for up in upsertions:
                if up.user not in errors:
                    name = MECHANISM_BY_TYPE[up.mechanism]
                    credential = ScramCredential.from_salted_password(name, up.salt, up.salted_password,
                                                                      up.iterations)
                    self._users.setdefault(up.user, {})[name] = credential
                    changed = True
            if changed:
                self._save()
        ok: tuple[ErrorCode, str | None] = (ErrorCode.NONE, None)
        return [(u, *errors.get(u, ok)) for u in order]

    def _save(self) -> None:
        SCRAM_CREDENTIALS.write(self.directory, {"users": {
            user: {mech: c.to_json() for mech, c in mechs.items()} for user, mechs in self._users.items()}})
