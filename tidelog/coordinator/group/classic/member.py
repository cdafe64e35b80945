"""One member of a classic group (Kafka's `MemberMetadata`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class JoinResult:
    """What a parked or immediate JoinGroup answers (Kafka's `JoinGroupResult`)."""

    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # leader only


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]           # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    last_heartbeat_ms: int = 0                   # Clock.monotonic_ms of the last Join/Sync/Heartbeat/commit
    is_new: bool = False                         # joined in the current rebalance (KIP-394 new member timeout)

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")

    def complete_join(self, result: JoinResult) -> None:
        fut, self.join_future = self.join_future, None
        _resolve(fut, result)

    def complete_sync(self, result: SyncResult) -> None:
        fut, self.sync_future = self.sync_future, None
        _resolve(fut, result)


def _resolve(fut: asyncio.Future[Any] | None, result: Any) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)
