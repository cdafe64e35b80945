"""StreamsGroupTopologyDescriptionUpdate (key 93, KIP-1331, Kafka 4.4): a member pushes its topology description
for the broker's topology description plugin. tidelog has no such plugin, as a Kafka broker without
`group.streams.topology.description.plugin.class`: the heartbeat never asks for a push, and a push is refused with
UNSUPPORTED_VERSION after the group checks (Kafka's GroupCoordinatorService.streamsGroupTopologyDescriptionUpdate)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, response_cls, streams_groups
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import Op

API_KEY = 93
NOTES = """no topology description plugin (Kafka's default): GROUP_AUTHORIZATION_FAILED without READ on the group,
INVALID_REQUEST for an empty group or member id, then UNSUPPORTED_VERSION "no topology description plugin is
configured"; UNSUPPORTED_VERSION while `streams.version` is 0"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    try:
        streams_groups(ctx)
        check_group(ctx, Op.READ, request.group_id)
        if not request.group_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not request.member_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "No topology description plugin is configured on this broker.")
    except KafkaError as e:
        return cls(throttle_time_ms=0, error_code=e.code, error_message=e.message)
