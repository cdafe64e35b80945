"""The consumer-group coordinator's heartbeat error: a leaf module, so that classic_members (which the coordinator
imports) can raise and catch it without importing the coordinator back."""

from __future__ import annotations


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or str(code))
        self.code = code
        self.message = message
