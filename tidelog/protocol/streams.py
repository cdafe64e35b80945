"""KIP-1071 streams-group codecs kafka-python 3.0.12 does not have: StreamsGroupHeartbeat (88) and
StreamsGroupDescribe (89) at Kafka 4.4's v0-1 (v1: the int64 AcceptableRecoveryLag, TopologyDescriptionRequired
and the MISSING_CLIENT_TAGS status; describe's IncludeTopologyDescription, TopologyDescription,
TopologyDescriptionStatus and AssignorName), and StreamsGroupTopologyDescriptionUpdate (93, KIP-1331). Schemas in
`tidelog/protocol/schemas/` follow Kafka's message JSON; kafka-python's schema-driven ApiMessage builds the codec
from them (as `tidelog.protocol.kip848` does)."""

from __future__ import annotations

from tidelog.protocol.messages import quiet_schema_loader

quiet_schema_loader()  # also installs the lazy `kafka` package

from kafka.protocol.api_message import ApiMessage  # noqa: E402

_SCHEMAS = "tidelog.protocol.schemas"


class StreamsGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupTopologyDescriptionUpdateRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class StreamsGroupTopologyDescriptionUpdateResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass
