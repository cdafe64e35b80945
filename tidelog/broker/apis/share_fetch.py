"""ShareFetch (key 78, KIP-932): a share-group member's acknowledgements and its next records, in a share
session (Kafka's KafkaApis.handleShareFetchRequest, SharePartitionManager, DelayedShareFetch)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from tidelog.broker.apis._shared import response_cls, share_member_request
from tidelog.broker.context import RequestContext
from tidelog.broker.share_acks import (
    Answer,
    PartitionKey,
    apply_acknowledgements,
    close_session,
    partition_acks,
    topic_id_bytes,
)
from tidelog.broker.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from tidelog.coordinator.share.share_partition import BATCH_OPTIMIZED
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, Op, authorized_names
from tidelog.storage import TopicPartition

API_KEY = 78
NOTES = """v1-2 (v2: ShareAcquireMode batch_optimized / record_limit, renew acknowledgements, KIP-1206/1222): share
sessions keyed by (group, member), closed by epoch -1 or the connection; piggybacked acknowledgements
(persisted before the answer); whole log batches, MaxRecords a soft limit shared by the partitions;
`share.record.lock.duration.ms`, `group.share.delivery.count.limit`, `group.share.partition.max.record.locks`,
`share.isolation.level` (read_committed: up to the LSO, aborted records archived); long poll on appends up to
MaxWaitMs, woken at once (as Kafka) by records released, acknowledged or whose acquisition lock times out;
partitions tried in an order rotating with the session epoch; the session epoch advances before the
acknowledgements are applied (Kafka's newContext). A failed state write: UNKNOWN_SERVER_ERROR, the change kept"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_cls(ctx)

    def error(code: int, message: str | None = None) -> Any:
        return cls(throttle_time_ms=0, error_code=code, error_message=message, acquisition_lock_timeout_ms=0,
                   responses=[], node_endpoints=[])

    renew = ctx.api_version >= 2 and bool(request.is_renew_ack)
    try:
        groups = share_member_request(ctx, request)
        if renew and (request.max_bytes or request.min_bytes or request.max_records or request.max_wait_ms):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "A renew acknowledgement fetches nothing: MaxBytes, MinBytes, "
                                                        "MaxRecords and MaxWaitMs must be 0")
    except KafkaError as e:
        return error(e.code, e.message)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    acks = partition_acks(request.topics or [])
    requested = [(topic_id_bytes(t.topic_id), p.partition_index) for t in request.topics or []
                 for p in t.partitions or []]
    sessions = ctx.broker.share_sessions
    added: set[PartitionKey] = set()
    if epoch == INITIAL_EPOCH:
        if acks:
            return error(ErrorCode.INVALID_REQUEST, "Acknowledge data is not allowed in a request that opens a "
                                                    "share session")
        opened = sessions.open(group_id, member_id, requested, _connection(ctx))
        if opened is None:
            return error(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
        session: ShareSession = opened
        added = set(requested)
    else:
        found = sessions.lookup(group_id, member_id, epoch)
        if isinstance(found, ErrorCode):
            return error(found)
        session = found
        if epoch != FINAL_EPOCH:
            # the session moves on before anything is awaited, so a second request at this epoch is refused even
            # while this one waits for the disk; it stays moved on if this request fails (Kafka's
            # SharePartitionManager.newContext updates the session before the acknowledgements are applied)
            for key in requested:
                if key not in session.partitions:
                    session.partitions[key] = None
                    added.add(key)
            for t in request.forgotten_topics_data or []:
                for p in t.partitions or []:
                    session.partitions.pop((topic_id_bytes(t.topic_id), p), None)
            session.advance()
    answers: dict[PartitionKey, Answer] = {}
    await apply_acknowledgements(ctx, groups, group_id, member_id, acks, renew, answers)
    lock_ms = groups.lock_duration_ms(group_id)
    if epoch == FINAL_EPOCH:
        await close_session(ctx, groups, session)  # fetches nothing
        return _response(cls, answers, lock_ms, full=True)
    # the session may have closed while the acknowledgements waited for the disk: then nothing is acquired for it
    if not renew and sessions.is_current(session):
        await _fetch(ctx, groups, session, request, answers)
        await groups.settled()  # lock expiry the acquisitions wrote is on disk before the answer, as before
    for key in added:
        answers.setdefault(key, Answer()).included = True
    return _response(cls, answers, lock_ms, full=epoch == INITIAL_EPOCH)


async def _fetch(ctx: RequestContext, groups: Any, session: ShareSession, request: Any,
                 answers: dict[PartitionKey, Answer]) -> None:
    """Acquire from every partition of the session (MaxRecords shared by them, MaxBytes split evenly; the order
    rotates with the session epoch so a backlog on one partition does not starve the others, as Kafka's
    PartitionRotateStrategy), waiting up to MaxWaitMs for appends while nothing could be acquired
    (DelayedShareFetch). A partition with an error is answered with it and does not end the wait for the others.
    After a wait the session must still be the cached one (closed or replaced meanwhile: nothing more is
    acquired for it) and topics are looked up again (one may have been deleted)."""
    keys = list(session.partitions)
    max_records = request.max_records
    if not keys or max_records <= 0 or request.max_bytes <= 0:
        return
    shift = session.epoch % len(keys)
    keys = keys[shift:] + keys[:shift]
    topics = ctx.broker.topics
    mode = request.share_acquire_mode if ctx.api_version >= 2 else BATCH_OPTIMIZED
    batch_size = max(0, request.batch_size or 0)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    per_partition = max(1, request.max_bytes // len(keys))
    while True:
        named = {key: topics.by_id(key[0]) for key in keys}
        readable = authorized_names(ctx, Op.READ, TOPIC, {i.name for i in named.values() if i is not None})
        logs = []
        tried: list[PartitionKey] = []  # acquired from (their timed-out locks were just expired)
        got = 0
        left = max_records
        for key in keys:
            info = named[key]
            answer = answers.setdefault(key, Answer())
            if info is None:
                answer.error = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            if info.name not in readable:
                answer.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            log_obj = topics.log(TopicPartition(info.name, key[1]))
            if log_obj is None:
                answer.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if left <= 0:
                continue
            try:
                acquired = groups.acquire(session.group_id, session.member_id, key[0], key[1], log_obj, left,
                                          per_partition, mode, batch_size)
            except KafkaError as e:
                answer.error, answer.message = e.code, e.message
                continue
            answer.error, answer.message = ErrorCode.NONE, None
            logs.append(log_obj)
            tried.append(key)
            if acquired.ranges:
                answer.records, answer.acquired = acquired.records, acquired.ranges
                count = sum(r.last_offset - r.first_offset + 1 for r in acquired.ranges)
                left -= count
                got += count
        remaining = int((deadline - loop.time()) * 1000)
        if got or remaining <= 0 or not logs:
            return
        # an acquisition lock timing out meanwhile makes records acquirable: wake then too (Kafka's lock-timeout
        # task completes the DelayedShareFetch); appends, releases and acknowledgements wake it through the purgatory
        lock_deadline = groups.next_lock_deadline(session.group_id, tried)
        until_lock = None if lock_deadline is None else max(1, lock_deadline - ctx.broker.clock.milliseconds())
        wait = remaining if until_lock is None else min(remaining, until_lock)
        if not await ctx.broker.purgatory.wait_for_append(logs, wait) and wait == remaining:
            # the wait ran out: one last attempt (DelayedShareFetch.onExpiration), then answer
            deadline = loop.time()
        if not ctx.broker.share_sessions.is_current(session):
            return


def _connection(ctx: RequestContext) -> tuple[str, str, int | None]:
    return (ctx.listener, ctx.client_host, ctx.client_port)


def _response(cls: Any, answers: dict[PartitionKey, Answer], lock_ms: int, full: bool) -> Any:
    T = cls.ShareFetchableTopicResponse
    P = T.PartitionData
    by_topic: dict[bytes, list[Any]] = {}
    for (topic_id, partition), a in answers.items():
        if not full and not (a.included or a.records or a.error or a.ack_error is not None):
            continue  # an incremental answer leaves out partitions with nothing to say
        by_topic.setdefault(topic_id, []).append(P(
            partition_index=partition, error_code=a.error, error_message=a.message,
            acknowledge_error_code=a.ack_error or 0, acknowledge_error_message=a.ack_message,
            current_leader=P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=a.records,
            acquired_records=[P.AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                                delivery_count=r.delivery_count) for r in a.acquired]))
    responses = [T(topic_id=uuid.UUID(bytes=t), partitions=sorted(ps, key=lambda p: p.partition_index))
                 for t, ps in by_topic.items()]
    return cls(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, acquisition_lock_timeout_ms=lock_ms,
               responses=responses, node_endpoints=[])
