"""Share sessions (KIP-932; Kafka's ShareSessionCache): the partitions a share-group member fetches, keyed by
(group id, member id), with the epoch its next ShareFetch or ShareAcknowledge must carry.

Epoch 0 opens a session (replacing one of the same key, whose records stay acquired until their locks time out,
as in Kafka), -1 closes it, any other epoch must be the one expected, after which the next one is expected (after
2**31 - 1 it wraps to 1). A session also closes with the connection that opened it; a closed session's records
are released (the coordinator's `release_member`). At most group.share.max.share.sessions sessions exist.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[bytes, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    connection: Hashable  # the connection that opened it
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)  # ordered set

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, group_id: str, member_id: str, partitions: list[TopicIdPartition],
             connection: Hashable) -> ShareSession | None:
        """Epoch 0: a new session (None when the cache is full: SHARE_SESSION_LIMIT_REACHED)."""
        key = (group_id, member_id)
        if key not in self._sessions and len(self._sessions) >= self.max_sessions:
            return None
        session = ShareSession(group_id, member_id, connection, partitions=dict.fromkeys(partitions))
        self._sessions[key] = session
        return session

    def lookup(self, group_id: str, member_id: str, epoch: int) -> ShareSession | ErrorCode:
        """The session a request with `epoch` (not 0) continues, or SHARE_SESSION_NOT_FOUND /
        INVALID_SHARE_SESSION_EPOCH."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return session

    def is_current(self, session: ShareSession) -> bool:
        """Whether `session` is still the cached one of its key (not closed or replaced)."""
        return self._sessions.get((session.group_id, session.member_id)) is session

    def close(self, session: ShareSession) -> None:
        if self._sessions.get((session.group_id, session.member_id)) is session:
            del self._sessions[(session.group_id, session.member_id)]

    def connection_closed(self, connection: Hashable) -> list[ShareSession]:
        """The sessions the closed connection had opened, now removed."""
        gone = [s for s in self._sessions.values() if s.connection == connection]
        for session in gone:
            self.close(session)
        return gone
