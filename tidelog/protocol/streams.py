"""KIP-1071 streams-group codecs kafka-python 3.0.12 does not have: StreamsGroupHeartbeat (88) and
StreamsGroupDescribe (89) at Kafka 4.4's v0-1 (v1: the int64 AcceptableRecoveryLag, TopologyDescriptionRequired
and the MISSING_CLIENT_TAGS status; describe's IncludeTopologyDescription, TopologyDescription,
TopologyDescriptionStatus and AssignorName), and StreamsGroupTopologyDescriptionUpdate (93, KIP-1331). Schemas in
`tidelog/protocol/schemas/` follow Kafka's message JSON; kafka-python's schema-driven ApiMessage builds the codec
from them (as `tidelog.protocol.kip848` does).

Describe v1's response fields are untagged and follow AuthorizedOperations: TopologyDescription (nullable struct),
TopologyDescriptionStatus (int8, default 0), AssignorName, as StreamsGroupDescribeResponse.json's diff in apache/kafka
PR #22920 shows (KIP-1331's first schema, PR #22397, had them tagged at v0; 4.4 moved them to v1). Not read from a
primary source: AssignorName's nullability (tidelog: nullable, null when a group failed) and the layout of the
TopologyDescription struct, which tidelog never fills (no description plugin)."""

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
