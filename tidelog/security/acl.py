"""Kafka's ACL enums and wildcards (org.apache.kafka.common.acl.AclOperation / AclPermissionType,
org.apache.kafka.common.resource.ResourceType / PatternType): what handlers name operations and resources with.
The bindings, their matching rules and their store are `acl_store`, imported only when ACLs are used."""

from __future__ import annotations

from enum import IntEnum

WILDCARD_RESOURCE = "*"  # ResourcePattern.WILDCARD_RESOURCE
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the only CLUSTER resource name


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3
