"""Acknowledgements of share-group records, as ShareFetch (piggybacked) and ShareAcknowledge carry them
(Kafka's KafkaApis.handleAcknowledgements / validateAcknowledgementBatches): per partition, validated, applied
all or none, and on disk before the request is answered (the state is written off the event loop)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidelog.coordinator.share.share_partition import AcknowledgementBatch, AcquiredRange, check_batches
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.authorizer import TOPIC, Op, authorized_names

if TYPE_CHECKING:
    from tidelog.broker.context import RequestContext
    from tidelog.broker.share_sessions import ShareSession
    from tidelog.broker.state import BrokerState
    from tidelog.coordinator.share.coordinator import ShareGroupCoordinator

PartitionKey = tuple[bytes, int]  # (topic id, partition)


@dataclass
class Answer:
    """What a ShareFetch / ShareAcknowledge says of one partition."""

    error: int = ErrorCode.NONE
    message: str | None = None
    ack_error: int | None = None  # None: the request acknowledged nothing here
    ack_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    included: bool = False  # listed even in an incremental answer (the partition joined the session)


def topic_id_bytes(topic_id: Any) -> bytes:
    """A request's topic id as 16 bytes (kafka-python decodes the all-zero id as None)."""
    return bytes(16) if topic_id is None else bytes(topic_id.bytes)


def partition_acks(topics: Iterable[Any]) -> dict[PartitionKey, list[AcknowledgementBatch]]:
    """The acknowledgement batches of each partition that has any."""
    out: dict[PartitionKey, list[AcknowledgementBatch]] = {}
    for t in topics:
        for p in t.partitions or []:
            batches = [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types or ()))
                       for b in p.acknowledgement_batches or []]
            if batches:
                out.setdefault((topic_id_bytes(t.topic_id), p.partition_index), []).extend(batches)
    return out


async def apply_acknowledgements(ctx: RequestContext, groups: ShareGroupCoordinator, group_id: str,
                                 member_id: str, acks: dict[PartitionKey, list[AcknowledgementBatch]], renew: bool,
                                 answers: dict[PartitionKey, Answer]) -> None:
    """Each partition's acknowledgements, their outcome in `answers[key].ack_error`."""
    topics = ctx.broker.topics
    infos = {key: topics.by_id(key[0]) for key in acks}
    readable = authorized_names(ctx, Op.READ, TOPIC, {i.name for i in infos.values() if i is not None})
    valid: dict[PartitionKey, list[AcknowledgementBatch]] = {}
    for key, batches in acks.items():
        answer = answers.setdefault(key, Answer())
        invalid = check_batches(batches, renew)
        info = infos[key]
        if invalid is not None:
            answer.ack_error, answer.ack_message = ErrorCode.INVALID_REQUEST, invalid
        elif info is None:
            answer.ack_error = ErrorCode.UNKNOWN_TOPIC_ID
        elif info.name not in readable:
            answer.ack_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not 0 <= key[1] < info.partitions:
            answer.ack_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            valid[key] = batches
    if valid:
        for key, (code, message) in (await groups.acknowledge(group_id, member_id, valid)).items():
            answers[key].ack_error, answers[key].ack_message = code, message


async def close_session(ctx: RequestContext, groups: ShareGroupCoordinator, session: ShareSession) -> None:
    """Epoch -1: the session ends and what its member holds is released (SharePartitionManager.releaseSession),
    on disk before the answer (a failed write is retried by the writer)."""
    ctx.broker.share_sessions.close(session)
    groups.release_member(session.group_id, session.member_id)
    await groups.settled()


def connection_closed(broker: BrokerState, connection: tuple[str, str, int | None]) -> None:
    """A closed connection's share sessions end and their members' records are released (written behind: no one
    waits for an answer)."""
    sessions = broker.share_sessions.connection_closed(connection)
    if not sessions:
        return
    try:
        groups = broker.groups.share_groups
    except KafkaError:
        return  # the coordinator is not loaded: nothing was acquired
    for session in sessions:
        groups.release_member(session.group_id, session.member_id)
