"""Helpers shared by several API handlers (handlers never import from each other)."""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tidelog.broker.context import RequestContext
from tidelog.broker.elr import check_min_isr_change
from tidelog.broker.features import GROUP_VERSION, SHARE_VERSION, STREAMS_VERSION
from tidelog.broker.mutation_quota import ControllerMutationQuota
from tidelog.broker.quotas import ANONYMOUS
from tidelog.broker.topics import INTERNAL_TOPICS, validate_topic_name
from tidelog.config.broker_config import ReadOnlyConfigError, UnknownConfigError
from tidelog.config.definitions import ConfigError
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class
from tidelog.security.acl import AclOperation
from tidelog.security.authorizer import (
    GROUP,
    TRANSACTIONAL_ID,
    Op,
    authorize,
    authorized_names,
    check_config_resource,
)
from tidelog.security.authorizer import TOPIC as TOPIC_RESOURCE
from tidelog.storage import TopicPartition

if TYPE_CHECKING:
    from tidelog.broker.topics import TopicInfo
    from tidelog.coordinator.group import GroupCoordinator
    from tidelog.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
    from tidelog.coordinator.group.streams.coordinator import StreamsGroupCoordinator
    from tidelog.coordinator.share.coordinator import ShareGroupCoordinator
    from tidelog.coordinator.transaction import TransactionCoordinator
    from tidelog.storage.log import Log



def response_cls(ctx: RequestContext) -> Any:
    """The kafka-python response class of the request's API and version (every handler's first lookup)."""
    return response_class(ctx.api_key)[ctx.api_version]


def topic_id_bytes(topic_id: Any, unset: bytes = b"") -> bytes:
    """A request's topic id as 16 bytes (kafka-python gives a UUID, the hand decoders bytes); `unset` for none."""
    if isinstance(topic_id, uuid.UUID):
        return topic_id.bytes
    return bytes(topic_id or unset)


def topic_by_id(ctx: RequestContext, topic_id: Any) -> TopicInfo | None:
    """The topic a request names by id (KIP-516); None for an unknown or all-zero id."""
    raw = topic_id_bytes(topic_id)
    return ctx.broker.topics.by_id(raw) if any(raw) else None


def request_mutation_quota(ctx: RequestContext, strict_since: int) -> ControllerMutationQuota:
    """The quota a CreateTopics / CreatePartitions / DeleteTopics request spends (Kafka's ControllerApis:
    `newQuotaFor(request, strictSinceVersion)`); left on `ctx` for the dispatch's throttle."""
    principal = ctx.principal
    user = ANONYMOUS if principal is None else principal.name
    quota = ctx.broker.quotas.mutation.new_quota_for(user, ctx.client_id, ctx.api_version, strict_since)
    ctx.mutation_quota = quota
    return quota


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    """The group coordinator; KafkaError(COORDINATOR_LOAD_IN_PROGRESS) while it loads (BrokerState.services)."""
    return ctx.broker.groups


def consumer_groups(ctx: RequestContext) -> ConsumerGroupCoordinator:
    """The KIP-848 coordinator; UNSUPPORTED_VERSION when `group.coordinator.rebalance.protocols` leaves out
    "consumer" (Kafka then does not serve the consumer protocol)."""
    groups: ConsumerGroupCoordinator | None = coordinator(ctx).consumer_groups
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "consumer group coordinator not running")
    if not groups.enabled:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "The consumer group protocol is not enabled")
    return groups


def share_groups(ctx: RequestContext) -> ShareGroupCoordinator:
    """The KIP-932 coordinator; UNSUPPORTED_VERSION while `share.version` is 0 (KafkaApis
    .isShareGroupProtocolEnabled: the APIs stay advertised and answer that)."""
    if ctx.broker.features.level(SHARE_VERSION) < 1:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "The share group protocol is not enabled")
    groups: ShareGroupCoordinator | None = coordinator(ctx).share_groups
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "share group coordinator not running")
    return groups


def streams_groups(ctx: RequestContext) -> StreamsGroupCoordinator:
    """The KIP-1071 coordinator; UNSUPPORTED_VERSION while `streams.version` is 0 or
    `group.coordinator.rebalance.protocols` leaves out "streams" (KafkaApis.isStreamsGroupProtocolEnabled)."""
    groups: StreamsGroupCoordinator | None = coordinator(ctx).streams_groups
    if ctx.broker.features.level(STREAMS_VERSION) < 1 or (groups is not None and not groups.config.enabled):
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "The streams group protocol is not enabled")
    if groups is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "streams group coordinator not running")
    return groups


MAX_SHARE_MEMBER_ID_LENGTH = 36  # KafkaApis: a share member id is the UUID string its client chose


def share_member_request(ctx: RequestContext, request: Any) -> ShareGroupCoordinator:
    """ShareFetch / ShareAcknowledge, in KafkaApis' order: share groups enabled, GROUP READ, a member id of at most
    36 characters and a group id (INVALID_REQUEST); the coordinator, else KafkaError with the top-level code."""
    groups = share_groups(ctx)
    check_group(ctx, Op.READ, request.group_id)
    member_id = request.member_id
    if not member_id or len(member_id) > MAX_SHARE_MEMBER_ID_LENGTH:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid member id in the request.")
    if not request.group_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    return groups


# Group AclOperations without an authorizer: READ 3, DELETE 6, DESCRIBE 8.
GROUP_OPERATIONS = frozenset({3, 6, 8})


def check_group(ctx: RequestContext, op: AclOperation, group_id: str | None) -> None:
    """KafkaApis: the group APIs need `op` on the group, else GROUP_AUTHORIZATION_FAILED."""
    if not authorize(ctx, op, GROUP, group_id or ""):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)



def check_leader_epoch(log_obj: Log, current_leader_epoch: int | None) -> ErrorCode:
    """Kafka's Partition.checkCurrentLeaderEpoch: -1 skips; older -> FENCED, newer -> UNKNOWN."""
    if current_leader_epoch is None or current_leader_epoch < 0:
        return ErrorCode.NONE
    if current_leader_epoch < log_obj.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > log_obj.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE

# AclOperation codes with no authorizer: every operation that applies (Kafka's authorizedOperations).
# Topic 3576: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
TOPIC_OPERATIONS = frozenset({3, 4, 5, 6, 7, 8, 10, 11})

# Cluster 8096: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12.
CLUSTER_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})

# Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: a request asking for more partitions in total
# fails whole with POLICY_VIOLATION (also keeps one request from blocking the broker on mkdirs).
MAX_PARTITIONS_PER_BATCH = 10_000

# ConfigResource types (Kafka's ConfigResource.Type ids).
TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
GROUP_CONFIGS = 32  # ConfigResource.Type.GROUP (GROUP above is the ACL resource type)

# Python logging levels under Kafka's (log4j) names, for BROKER_LOGGER resources.
LOG_LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}

ROOT_LOGGER = "root"



def check_broker_name(ctx: RequestContext, name: str | None, allow_default: bool = True) -> bool:
    """True for this broker's own id, False for "" (cluster default); INVALID_REQUEST for anything else."""
    if name == "" and allow_default:
        return False
    if name is not None and name.strip().lstrip("-").isdigit() and int(name) == ctx.broker.node_id:
        return True
    expected = f"{ctx.broker.node_id} or empty string" if allow_default else str(ctx.broker.node_id)
    raise KafkaError(
        ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but received {name}"
    )



def topic_info(ctx: RequestContext, name: str) -> TopicInfo:
    validate_topic_name(name)
    info = ctx.broker.topics.get(name)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    return info



def check_duplicate_keys(configs: Any) -> None:
    names = [c.name for c in configs or []]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")



def apply_topic_overrides(ctx: RequestContext, name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
    topics = ctx.broker.topics
    topic_info(ctx, name)
    topics.check_overrides(name, overrides)
    if not validate_only:
        topics.set_overrides(name, dict(overrides))



def consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """KIP-848's APIs are served while `group.version` is 1 or more (Kafka's GroupVersion); at 0 they answer
    UNSUPPORTED_VERSION, as a Kafka 4 cluster whose group.version was downgraded."""
    return ctx.broker.features.level(GROUP_VERSION) >= 1


def apply_broker_configs(ctx: RequestContext, per_broker: bool, values: Mapping[str, str], validate_only: bool,
                         named: Iterable[str]) -> None:
    """Kafka accepts only dynamically updatable broker configs; a static one is INVALID_REQUEST
    (ConfigAdminManager turns the ConfigException into InvalidRequestException). `values` is the resource's new
    dynamic set, `named` the configs the request names (KIP-966's rules on min.insync.replicas: broker/elr.py)."""
    try:
        ctx.broker.config.validate_dynamic(values, per_broker)
        check_min_isr_change(ctx.broker, per_broker, named, values)
        if not validate_only:
            ctx.broker.topics.set_broker_configs(per_broker, values)
    except UnknownConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    except ReadOnlyConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid config value for resource: {exc}") from None



def alter_resources(
    ctx: RequestContext, request: Any, alter_one: Callable[[RequestContext, Any, bool], None]
) -> list[Any]:
    """Run `alter_one` per resource; build AlterConfigsResourceResponse entries (same shape in both APIs)."""
    result_cls = response_class(ctx.api_key).AlterConfigsResourceResponse
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources or [])
    validate_only = bool(request.validate_only)
    results: list[Any] = []
    for resource in request.resources or []:
        result = result_cls(
            error_code=0, error_message=None, resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        try:
            if counts[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            check_config_resource(ctx, resource.resource_type, resource.resource_name or "", alter=True)
            check_duplicate_keys(resource.configs)
            alter_one(ctx, resource, validate_only)
        except KafkaError as exc:
            result.error_code, result.error_message = int(exc.code), exc.message
        results.append(result)
    return results


def txn_coordinator(ctx: RequestContext) -> TransactionCoordinator:
    """KafkaError(COORDINATOR_LOAD_IN_PROGRESS) while it loads (Kafka's TransactionStateManager.getTransactionState
    answers so for a partition still loading)."""
    return ctx.broker.txn_coordinator


def for_version(error: int, version: int, fenced_since: int) -> int:
    """KIP-588: PRODUCER_FENCED only for request versions that know it; older ones get INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


# --- authorization of the transaction APIs (KafkaApis) ---

def check_transactional_id(ctx: RequestContext, transactional_id: str | None,
                           group_id: str | None = None) -> ErrorCode:
    """WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then, for the APIs that name a
    group (AddOffsetsToTxn, TxnOffsetCommit), READ on the group (GROUP_AUTHORIZATION_FAILED); NONE if allowed."""
    if not authorize(ctx, Op.WRITE, TRANSACTIONAL_ID, transactional_id or ""):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if group_id is not None and not authorize(ctx, Op.READ, GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def unauthorized_topics(ctx: RequestContext, op: AclOperation, names: Iterable[str]) -> set[str]:
    """The names the principal may not `op` (none without an authorizer)."""
    wanted = set(names)
    return wanted - authorized_names(ctx, op, TOPIC_RESOURCE, wanted)


def add_partitions_errors(ctx: RequestContext, transactional_id: str | None,
                          wanted: list[TopicPartition]) -> dict[TopicPartition, int] | None:
    """KafkaApis.handleAddPartitionsToTxnRequest (v0-3) before the coordinator: WRITE on the transactional id,
    then per partition TOPIC_AUTHORIZATION_FAILED (no WRITE on the topic), else UNKNOWN_TOPIC_OR_PARTITION; if any
    partition failed the others are OPERATION_NOT_ATTEMPTED. None: all may be added."""
    if check_transactional_id(ctx, transactional_id) != ErrorCode.NONE:
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    names = {tp.topic for tp in wanted}
    denied = unauthorized_topics(ctx, Op.WRITE, names)
    if ctx.broker.security.authorizer is not None:
        denied |= names & INTERNAL_TOPICS  # Kafka never authorizes an internal topic here
    topics = ctx.broker.topics
    errors: dict[TopicPartition, int] = {}
    for tp in wanted:
        info = topics.get(tp.topic)
        if tp.topic in denied:
            errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None or not 0 <= tp.partition < info.partitions:
            errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if not errors:
        return None
    return {tp: errors.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
