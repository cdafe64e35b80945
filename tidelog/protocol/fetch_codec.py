"""Fetch (key 1) v4-18 response encoder, by hand: kafka-python's codec copies every partition's records into
its output buffer; this one leaves them as separate pieces (the FileRecords slices of the segment files that
`Log.read_slice` returns, or bytes) so the connection writes them to the socket without joining: a slice with
sendfile (broker/frame_stream.py), the encoded fields around it as bytes.

Field layout: Kafka's FetchResponse.json (flexible from v12: compact lengths and tagged fields, KIP-482).
diverging_epoch, current_leader, snapshot_id (v12+) and node_endpoints (v16) are tagged fields that tidelog
never sets, so they are left out, which is their default. v17 and v18 only add tagged fields to the request
(ReplicaDirectoryId, KIP-853; HighWatermark, KIP-1166): the response is v16's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from tidelog.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    EncodedResponse,
    Piece,
    array_length_bytes,
    bytes_length_bytes,
    string_bytes,
)

if TYPE_CHECKING:
    from tidelog.protocol.file_records import FileRecords

FLEXIBLE_MIN_VERSION = 12
TOPIC_ID_MIN_VERSION = 13
_TOP_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION = struct.Struct(">ihqqq")  # partition_index, error_code, high_watermark, last_stable_offset, log_start
_ABORTED = struct.Struct(">qq")
_INT32 = struct.Struct(">i")


class FetchPartitionResponse(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[tuple[int, int]] | None  # (producer id, first offset); None = null
    records: FileRecords | bytes | memoryview | None  # only len() is taken here; the slice is a piece as is


def encode_fetch_response(version: int, error_code: int, session_id: int,
                          topics: Iterable[tuple[str | bytes, list[FetchPartitionResponse]]],
                          throttle_time_ms: int = 0) -> list[Piece]:
    """The response body (no header) as pieces: small joined headers between the record data. `topics` is
    (name, partitions) for v4-12 and (16-byte topic id, partitions) for v13+."""
    if not 4 <= version <= 18:
        raise ValueError(f"Fetch v{version} is not encoded here")
    flexible = version >= FLEXIBLE_MIN_VERSION
    by_id = version >= TOPIC_ID_MIN_VERSION
    pieces: list[Piece] = []
    head: list[bytes] = []  # fixed-size fields gathered until the next records piece
    if version >= 7:
        head.append(_TOP_V7.pack(throttle_time_ms, error_code, session_id))
    else:
        head.append(_INT32.pack(throttle_time_ms))
    topics = list(topics)
    head.append(array_length_bytes(len(topics), flexible))
    for key, partitions in topics:
        if by_id:
            assert isinstance(key, bytes) and len(key) == 16
            head.append(key)
        else:
            assert isinstance(key, str)
            head.append(string_bytes(key, flexible))
        head.append(array_length_bytes(len(partitions), flexible))
        for p in partitions:
            packed = _PARTITION.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                     p.log_start_offset)
            head.append(packed if version >= 5 else packed[:-8])
            aborted = p.aborted_transactions
            if aborted is None:
                head.append(array_length_bytes(-1, flexible))
            else:
                head.append(array_length_bytes(len(aborted), flexible))
                for producer_id, first_offset in aborted:
                    head.append(_ABORTED.pack(producer_id, first_offset))
                    if flexible:
                        head.append(EMPTY_TAGGED_FIELDS)
            if version >= 11:
                head.append(b"\xff\xff\xff\xff")  # preferred_read_replica -1
            records = p.records
            if records is None:
                head.append(bytes_length_bytes(-1, flexible))
            else:
                head.append(bytes_length_bytes(len(records), flexible))
                if len(records):
                    pieces.append(b"".join(head))
                    pieces.append(records)
                    head = []
            if flexible:
                head.append(EMPTY_TAGGED_FIELDS)
        if flexible:
            head.append(EMPTY_TAGGED_FIELDS)
    if flexible:
        head.append(EMPTY_TAGGED_FIELDS)
    if head:
        pieces.append(b"".join(head))
    return pieces


class FetchTopicResponse:
    __slots__ = ("key", "partitions")

    def __init__(self, key: str | bytes, partitions: list[FetchPartitionResponse]) -> None:
        self.key = key  # the topic name (v4-12) or its 16-byte id (v13+)
        self.partitions = partitions


class FetchResponseData(EncodedResponse):
    """A Fetch response, encoded when the connection writes it: the client quotas read its record sizes,
    set throttle_time_ms and empty `responses` of a throttled fetch first, as on a kafka-python response."""

    def __init__(self, version: int, error_code: int, session_id: int, responses: list[FetchTopicResponse]) -> None:
        self.version = version
        self.error_code = error_code
        self.session_id = session_id
        self.responses = responses
        self.throttle_time_ms = 0
        self.flexible = version >= FLEXIBLE_MIN_VERSION

    def pieces(self) -> list[Piece]:
        return encode_fetch_response(self.version, self.error_code or 0, self.session_id,
                                     [(t.key, t.partitions) for t in self.responses], self.throttle_time_ms)
