"""DeleteGroups (key 42): only Empty groups; tombstones for their offsets and metadata (§3.8)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import coordinator, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, Op, authorized_names

API_KEY = 42
NOTES = """v3 (Kafka 4.4): a per-group ErrorMessage, null unless the failure carried a cause; only empty groups (classic, consumer, streams or share; a share or streams group's state goes with it)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    names = list(request.groups_names or [])
    deletable = authorized_names(ctx, Op.DELETE, GROUP, names)  # KafkaApis.handleDeleteGroupsRequest
    allowed = [n for n in names if n in deletable]
    result: dict[str, int] = dict.fromkeys(names, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    messages: dict[str, str] = {}  # v3's ErrorMessage: null unless a failure carried a cause (Kafka 4.4)
    if allowed:
        try:
            groups = coordinator(ctx)
            consumer = groups.consumer_groups
            mine = [n for n in allowed if consumer is not None and consumer.is_consumer_group(n)]
            share = groups.share_groups
            shared = [n for n in allowed if share is not None and share.is_share_group(n)]
            streams = groups.streams_groups
            streaming = [n for n in allowed if streams is not None and streams.is_streams_group(n)]
            result.update(groups.delete_groups([n for n in allowed
                                                if n not in mine and n not in shared and n not in streaming]))
            if streams is not None:  # NON_EMPTY_GROUP while it has members; its offsets go with it
                result.update({n: streams.delete_group(n) for n in streaming})
                if streaming:
                    await streams.durable()
            if consumer is not None:
                result.update({n: consumer.delete_group(n) for n in mine})
            if share is not None:  # NON_EMPTY_GROUP while it has members
                result.update({n: share.delete_group(n) for n in shared})
                if shared:
                    await share.durable()
        except KafkaError as e:
            result.update(dict.fromkeys(allowed, e.code))
            if e.message:
                messages.update(dict.fromkeys(allowed, e.message))
    return cls(throttle_time_ms=0, results=[cls.DeletableGroupResult(group_id=n, error_code=result[n],
                                                                     error_message=messages.get(n))
                                            for n in names])
