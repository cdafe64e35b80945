"""Codecs of messages Kafka 4.4 bumped past what kafka-python 3.0.12 knows. The schemas in
`tidelog/protocol/schemas/` follow Kafka's message JSON; kafka-python's schema-driven ApiMessage builds the codec
from them (as `tidelog.protocol.kip848`).

- DeleteGroups v3: a per-group ErrorMessage in the response; the request is unchanged.
- ApiVersions v5 (KIP-1242): the request's nullable ClusterId (default null) and int32 NodeId (default -1), both
  `versions` 5+, untagged and ignorable; the response is v4's. The broker decodes and encodes ApiVersions by hand
  (protocol/metadata_codec.py); these classes serve tests and tools. Layout: Kafka's ApiVersionsRequest.json as
  vendored by krabka-io/krabka-protocol (02746b4, crates/protocol/schemas/), matching franz-go PR #1446/#1449's
  account (ClusterID and NodeID at v5, NodeID default -1).
- TxnOffsetCommit v6 (KIP-1319): each topic by TopicId (uuid, 6+) in place of Name (now 0-5), in the request and
  the response; both ignorable. Layout: TxnOffsetCommitRequest.json / TxnOffsetCommitResponse.json of
  dajac/kafka @35bebdfb3c (the KAFKA-20444 author's branch), as apache/kafka PR #22205 describes it ("a new TopicId
  field at 6+ and bounds the existing Name field to 0-5 on both the request and the response"); Kafka's later
  source-only rename of GenerationId to GenerationIdOrMemberEpoch leaves the wire unchanged.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from tidelog.protocol.messages import quiet_schema_loader

quiet_schema_loader()  # also installs the lazy `kafka` package

from kafka.protocol.api_message import ApiMessage  # noqa: E402

_SCHEMAS = "tidelog.protocol.schemas"


class DeleteGroupsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class DeleteGroupsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ApiVersionsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ApiVersionsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    """With kafka-python's ApiVersionsResponse rules (kafka.protocol.metadata.api_versions): the response header
    is always v0 (KIP-511) and a body with an error is read as v0. kafka-python's clients in the same process look
    the response class up by api key (ResponseClassRegistry), so this one must read their answers as theirs does.
    (Kafka writes INVALID_REQUEST and REBOOTSTRAP_REQUIRED at the request's version; tests read those bytes.)"""

    @classmethod
    def parse_header(cls, data: Any, version: int | None = None) -> Any:
        return cls.header_class.decode(data, flexible=False)

    def encode_header(self, flexible: bool = False) -> Any:
        return super().encode_header(flexible=False)

    @classmethod
    def decode(cls, data: Any, version: int | None = None, header: bool = False, framed: bool = False) -> Any:
        buf = data if hasattr(data, "tell") else io.BytesIO(bytes(data))
        if framed:
            buf.read(4)
        parsed_header = cls.parse_header(buf) if header else None
        start = buf.tell()
        (error_code,) = struct.unpack(">h", buf.read(2))
        buf.seek(start)
        body = super().decode(buf.read(), version=0 if error_code else version)
        if parsed_header is not None:
            body._header = parsed_header
        return body


class TxnOffsetCommitRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class TxnOffsetCommitResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass
