"""Kafka's StandardAuthorizer (and AclAuthorizer, same semantics on one node): super.users,
allow.everyone.if.no.acl.found, LITERAL / PREFIXED / wildcard ACLs, host filters, DENY over ALLOW, implied
operations (READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS).

Handlers enter it with one call (`authorize`, `authorized_names`, `authorize_by_resource_type`); without an
authorizer configured each is a single attribute check that answers True.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from tidelog.config.definitions import ConfigError
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

if TYPE_CHECKING:  # the bindings and their store are imported when an authorizer is configured
    from tidelog.security.acl_store import AclBinding, AclStore
    from tidelog.security.principal import KafkaPrincipal

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
AUTHORIZER_CLASSES = (STANDARD_AUTHORIZER, ACL_AUTHORIZER, "kafka.security.auth.SimpleAclAuthorizer")

# AclEntry.supportedOperations implications for ALLOW rules (a DENY only denies its own operation or ALL).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER, AclOperation.ALL}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                                              AclOperation.ALL}),
}

CLUSTER = ResourceType.CLUSTER
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID
Op = AclOperation


def _allows(acl_op: AclOperation, op: AclOperation) -> bool:
    implied = _IMPLIED_BY.get(op)
    return acl_op in implied if implied is not None else acl_op in (op, AclOperation.ALL)


class StandardAuthorizer:
    def __init__(self, store: AclStore, super_users: Iterable[str], allow_if_no_acl: bool) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_if_no_acl
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}
        self._index(store.acls())
        store.listeners.append(self._index)

    @classmethod
    def from_config(cls, config: Any, store: AclStore) -> StandardAuthorizer:
        name = str(config.get("authorizer.class.name") or "")
        if name not in AUTHORIZER_CLASSES:
            raise ConfigError(f"authorizer.class.name {name} is not supported: use {STANDARD_AUTHORIZER} "
                              f"or {ACL_AUTHORIZER}")
        supers = [s.strip() for s in str(config.get("super.users") or "").split(";") if s.strip()]
        return cls(store, supers, bool(config.get("allow.everyone.if.no.acl.found")))

    def _index(self, acls: list[AclBinding]) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for acl in acls:
            if acl.pattern_type == PatternType.LITERAL:
                literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(acl.resource_type, []).append(acl)
        self._literal, self._prefixed = literal, prefixed  # swapped whole: readers never see a partial index

    def _matching(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            found += self._literal.get((resource_type, WILDCARD_RESOURCE), ())
        found += [a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.resource_name)]
        return found

    def authorize(self, principal: str, host: str, op: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._matching(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        allowed = False
        for acl in acls:
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD_HOST):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.operation in (op, AclOperation.ALL):
                    return False  # DENY wins over every ALLOW
            elif not allowed and _allows(acl.operation, op):
                allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType (KIP-679): is `op` allowed on at least one resource of the
        type — an ALLOW rule not cancelled by a DENY on the same or a covering pattern."""
        if principal in self.super_users:
            return True
        denied_literal: set[str] = set()
        denied_prefixes: list[str] = []
        allows: list[AclBinding] = []
        for acl in self.store.acls():
            if acl.resource_type != resource_type:
                continue
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD_HOST):
                continue
            if acl.permission_type == AclPermissionType.DENY and acl.operation in (op, AclOperation.ALL):
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD_RESOURCE:
                        return False
                    denied_literal.add(acl.resource_name)
                else:
                    denied_prefixes.append(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW and _allows(acl.operation, op):
                allows.append(acl)
        for acl in allows:
            covered = any(acl.resource_name.startswith(p) for p in denied_prefixes)
            if acl.pattern_type == PatternType.LITERAL:
                covered = covered or acl.resource_name in denied_literal
            if not covered:
                return True
        # Nothing explicitly allowed: what an unknown resource of the type would get (allow.everyone...).
        return self.authorize(principal, host, op, resource_type, "__tidelog_no_such_resource__")


# --- the calls handlers make ---

class AuthorizableRequestContext(Protocol):
    """What security sees of a request (Kafka's AuthorizableRequestContext): who sent it from where, and the
    broker's authorizer; never the broker state. The broker's RequestContext is one."""

    client_host: str
    listener: str
    client_id: str | None
    api_key: int
    api_version: int

    @property
    def principal(self) -> KafkaPrincipal | None: ...  # None: ANONYMOUS (a PLAINTEXT listener)

    @property
    def authorizer(self) -> StandardAuthorizer | None: ...


RequestContext = AuthorizableRequestContext  # the name the calls below are written with

_ANONYMOUS = "User:ANONYMOUS"  # str(tidelog.security.principal.ANONYMOUS), without importing it on the hot path


def _principal(ctx: RequestContext) -> str:
    principal = ctx.principal
    return _ANONYMOUS if principal is None else str(principal)


def authorize(ctx: RequestContext, op: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """May the request's principal perform `op` on the resource? True when no authorizer is configured."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return bool(authorizer.authorize(_principal(ctx), ctx.client_host, op, resource_type, name))


def authorize_cluster(ctx: RequestContext, op: AclOperation) -> bool:
    return authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_names(ctx: RequestContext, op: AclOperation, resource_type: ResourceType,
                     names: Iterable[str]) -> set[str]:
    """The subset of `names` the principal may `op` (all of them without an authorizer)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return set(names)
    principal = _principal(ctx)
    return {n for n in names if authorizer.authorize(principal, ctx.client_host, op, resource_type, n)}


def authorize_by_resource_type(ctx: RequestContext, op: AclOperation, resource_type: ResourceType) -> bool:
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    return bool(authorizer.authorize_by_resource_type(_principal(ctx), ctx.client_host, op, resource_type))


# AclEntry.supportedOperations: what authorizedOperations reports on (KIP-430).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
            Op.ALTER_CONFIGS),
    GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER,
              Op.DESCRIBE),
    TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str,
                          without_authorizer: Iterable[int]) -> set[int]:
    """Kafka's AuthHelper.authorizedOperations: the supported operations the principal may perform on the
    resource (AclOperation codes, for kafka-python's bitfield); `without_authorizer` when none is configured."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return set(without_authorizer)
    principal = _principal(ctx)
    return {int(op) for op in SUPPORTED_OPERATIONS[resource_type]
            if authorizer.authorize(principal, ctx.client_host, op, resource_type, name)}


def to_32_bit_field(ops: Iterable[int]) -> int:
    """Kafka's Utils.to32BitField, for the codecs that take the bitfield as an int."""
    return sum(1 << op for op in set(ops))


def cluster_authorized_operations(ctx: RequestContext, without_authorizer: Iterable[int]) -> set[int]:
    """Metadata v8-10 / DescribeCluster: no DESCRIBE on the cluster reports no operation at all (Kafka sets 0)."""
    if ctx.authorizer is not None and not authorize_cluster(ctx, Op.DESCRIBE):
        return set()
    return authorized_operations(ctx, CLUSTER, CLUSTER_NAME, without_authorizer)


_CONFIG_TOPIC, _CONFIG_BROKER, _CONFIG_BROKER_LOGGER, _CONFIG_GROUP = 2, 4, 8, 32  # ConfigResource.Type


def check_config_resource(ctx: RequestContext, config_resource_type: int, name: str, alter: bool) -> None:
    """KafkaApis / ConfigHelper: DESCRIBE_CONFIGS (ALTER_CONFIGS to change) on the topic, group or cluster
    (BROKER_LOGGER: DESCRIBE / ALTER_CONFIGS on the cluster). Raises KafkaError with Kafka's code."""
    if ctx.authorizer is None:
        return

    op = Op.ALTER_CONFIGS if alter else Op.DESCRIBE_CONFIGS
    if config_resource_type == _CONFIG_TOPIC:
        if not authorize(ctx, op, TOPIC, name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
    elif config_resource_type == _CONFIG_GROUP:
        if not authorize(ctx, op, GROUP, name):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
    else:
        if config_resource_type == _CONFIG_BROKER_LOGGER and not alter:
            op = Op.DESCRIBE
        if not authorize_cluster(ctx, op):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
