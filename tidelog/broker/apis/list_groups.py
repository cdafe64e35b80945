"""ListGroups (key 16), with the v4 state filter and v5 type filter (Kafka's GroupCoordinator)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import coordinator
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.authorizer import GROUP, Op, authorize_cluster, authorized_names

API_KEY = 16
NOTES = """v4 state filter, v5 type filter (`classic`, `consumer`, `share`, `streams`); share groups are listed
with protocol type `share` and state `Empty` or `Stable`; streams groups with protocol type `streams` and Kafka's
StreamsGroupState (`Empty`, `NotReady`, `Assigning`, `Reconciling`, `Stable`)"""

GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"
GROUP_TYPE_SHARE = "share"
GROUP_TYPE_STREAMS = "streams"


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    cls = response_class(API_KEY)[version]
    try:
        groups = coordinator(ctx).list_groups()
    except KafkaError as e:
        return cls(throttle_time_ms=0, error_code=e.code, groups=[])
    states = {s.lower() for s in (request.states_filter or [])} if version >= 4 else set()
    types = {t.lower() for t in (request.types_filter or [])} if version >= 5 else set()
    listed = []
    if not authorize_cluster(ctx, Op.DESCRIBE):  # KafkaApis.handleListGroupsRequest: else DESCRIBE per group
        visible = authorized_names(ctx, Op.DESCRIBE, GROUP, [g.group_id for g in groups])
        groups = [g for g in groups if g.group_id in visible]
    consumer = coordinator(ctx).consumer_groups
    consumer_groups = consumer.list_groups() if consumer is not None else []
    if consumer_groups and not authorize_cluster(ctx, Op.DESCRIBE):
        visible_cg = authorized_names(ctx, Op.DESCRIBE, GROUP, [g.group_id for g in consumer_groups])
        consumer_groups = [g for g in consumer_groups if g.group_id in visible_cg]
    consumer_ids = {g.group_id for g in consumer_groups}
    share = coordinator(ctx).share_groups
    share_groups = share.list_groups() if share is not None else []
    if share_groups and not authorize_cluster(ctx, Op.DESCRIBE):
        visible_sg = authorized_names(ctx, Op.DESCRIBE, GROUP, [g.group_id for g in share_groups])
        share_groups = [g for g in share_groups if g.group_id in visible_sg]
    for sg in share_groups:  # GroupMetadataManager.listGroups: ShareGroup, protocol type "share"
        if (states and sg.state.lower() not in states) or (types and GROUP_TYPE_SHARE not in types):
            continue
        listed.append(cls.ListedGroup(group_id=sg.group_id, protocol_type=GROUP_TYPE_SHARE, group_state=sg.state,
                                      group_type=GROUP_TYPE_SHARE))
    streams = coordinator(ctx).streams_groups
    streams_groups = streams.list_groups() if streams is not None else []
    if streams_groups and not authorize_cluster(ctx, Op.DESCRIBE):
        visible_st = authorized_names(ctx, Op.DESCRIBE, GROUP, [g.group_id for g in streams_groups])
        streams_groups = [g for g in streams_groups if g.group_id in visible_st]
    streams_ids = {g.group_id for g in streams_groups}
    for st in streams_groups:  # GroupMetadataManager.listGroups: StreamsGroup, protocol type "streams"
        state = st.state.value
        if (states and state.lower() not in states) or (types and GROUP_TYPE_STREAMS not in types):
            continue
        listed.append(cls.ListedGroup(group_id=st.group_id, protocol_type=GROUP_TYPE_STREAMS, group_state=state,
                                      group_type=GROUP_TYPE_STREAMS))
    for cg in consumer_groups:
        state = cg.state.value
        if (states and state.lower() not in states) or (types and GROUP_TYPE_CONSUMER not in types):
            continue
        listed.append(cls.ListedGroup(group_id=cg.group_id, protocol_type="consumer", group_state=state,
                                      group_type=GROUP_TYPE_CONSUMER))
    for g in groups:
        if g.group_id in consumer_ids or g.group_id in streams_ids:
            continue  # the offsets of a consumer group, kept by the classic coordinator
        if states and g.state.value.lower() not in states:
            continue
        if types and GROUP_TYPE_CLASSIC not in types:
            continue
        listed.append(cls.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "",
                                      group_state=g.state.value, group_type=GROUP_TYPE_CLASSIC))
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=listed)
