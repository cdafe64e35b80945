"""KIP-932 share-group codecs kafka-python 3.0.12 does not have: ShareGroupHeartbeat (76), ShareGroupDescribe (77),
ShareFetch (78), ShareAcknowledge (79), DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92), at the versions Kafka 4.3 serves. Kafka 4.1 removed the early-access v0 of 76-79, so their
schemas list validVersions "1" / "1-2" while their fields say "0+"; kafka-python's ApiMessage counts versions from 0
whatever the schema's minimum (`cls[0]` builds, the broker advertises only what it serves). Schemas in
`tidelog/protocol/schemas/` follow Kafka's message JSON; kafka-python's schema-driven ApiMessage builds the codec from
them (as `tidelog.protocol.kip848` does)."""

from __future__ import annotations

from tidelog.protocol.messages import quiet_schema_loader

quiet_schema_loader()  # also installs the lazy `kafka` package

from kafka.protocol.api_message import ApiMessage  # noqa: E402

_SCHEMAS = "tidelog.protocol.schemas"


class ShareGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareFetchRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareFetchResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareAcknowledgeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ShareAcknowledgeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass
