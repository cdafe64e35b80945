"""DeleteGroups (key 42): only Empty groups; tombstones for their offsets and metadata (§3.8)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import coordinator, response_cls
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import GROUP, Op, authorized_names

API_KEY = 42
NOTES = """v3 (Kafka 4.4): a per-group ErrorMessage, null unless the failure carried a cause; only empty groups (classic, consumer, streams or share; a share or streams group's state goes with it, written before the answer); a
failed write of that state: UNKNOWN_SERVER_ERROR for the groups it deleted, the deletion kept in memory (Kafka reverts
it) and retried"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)
    names = list(request.groups_names or [])
    deletable = authorized_names(ctx, Op.DELETE, GROUP, names)  # KafkaApis.handleDeleteGroupsRequest
    allowed = [n for n in names if n in deletable]
    result: dict[str, int] = dict.fromkeys(names, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    messages: dict[str, str] = {}  # v3's ErrorMessage: null unless a failure carried a cause (Kafka 4.4)
    if allowed:
        answered: dict[str, int] = {}
        try:
            await _delete(coordinator(ctx), allowed, answered, messages)
        except KafkaError as e:  # the coordinator is not available: the groups not answered yet get its error
            for n in allowed:
                if n not in answered:
                    answered[n] = e.code
                    if e.message:
                        messages[n] = e.message
        result.update(answered)
    return cls(throttle_time_ms=0, results=[cls.DeletableGroupResult(group_id=n, error_code=result[n],
                                                                     error_message=messages.get(n))
                                            for n in names])


async def _delete(groups: Any, allowed: list[str], result: dict[str, int], messages: dict[str, str]) -> None:
    """Every deletion first, on the loop and in one go; then the streams and share stores' writes are awaited once.
    A failed write answers UNKNOWN_SERVER_ERROR for the groups of that store it deleted (the deletion stays made
    in memory and the writer retries it) and leaves the other answers as they were."""
    consumer, share, streams = groups.consumer_groups, groups.share_groups, groups.streams_groups
    mine = [n for n in allowed if consumer is not None and consumer.is_consumer_group(n)]
    shared = [n for n in allowed if share is not None and share.is_share_group(n)]
    streaming = [n for n in allowed if streams is not None and streams.is_streams_group(n)]
    result.update(groups.delete_groups([n for n in allowed if n not in mine and n not in shared
                                        and n not in streaming]))
    if consumer is not None:
        result.update({n: consumer.delete_group(n) for n in mine})
    # NON_EMPTY_GROUP while they have members; a streams group's offsets go with it
    written = []
    if streams is not None and streaming:
        result.update({n: streams.delete_group(n) for n in streaming})
        written.append((streams, streaming))
    if share is not None and shared:
        result.update({n: share.delete_group(n) for n in shared})
        written.append((share, shared))
    for store, names in written:
        try:
            await store.durable()
        except KafkaError as e:
            for n in names:
                if result[n] == ErrorCode.NONE:
                    result[n] = e.code
                    if e.message:
                        messages[n] = e.message
