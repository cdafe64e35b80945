"""StreamsGroupTopologyDescriptionUpdate (key 93, KIP-1331, Kafka 4.4): a member pushes its topology description
for the broker's topology description plugin. tidelog has no such plugin, as a Kafka broker without
`group.streams.topology.description.plugin.class`: the heartbeat never asks for a push, and a push is refused with
UNSUPPORTED_VERSION (Kafka's GroupCoordinatorService.streamsGroupTopologyDescriptionUpdate)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import check_group, response_cls, streams_groups
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import Op

API_KEY = 93
NOTES = """no topology description plugin (Kafka's default): GROUP_AUTHORIZATION_FAILED without READ on the group,
else UNSUPPORTED_VERSION ("The broker has no streams group topology description plugin configured."), as Kafka
answers before it looks at the member or group ids; UNSUPPORTED_VERSION while `streams.version` is 0"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    try:
        streams_groups(ctx)
        check_group(ctx, Op.READ, request.group_id)
        # GroupCoordinatorService.throwIfStreamsGroupTopologyDescriptionUpdateInvalid: the plugin first, then the
        # member and group ids; with no plugin every push ends at the first check
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                         "The broker has no streams group topology description plugin configured.")
    except KafkaError as e:
        return cls(throttle_time_ms=0, error_code=e.code, error_message=e.message)
