"""ACL bindings and filters over Kafka's enums (`tidelog.security.acl`) and their matching
rules (AclBindingFilter.matches, ResourcePatternFilter, AccessControlEntryFilter), kept durably in
`<first log dir>/tidelog-acls.json` (atomic replace), where KRaft keeps them in the metadata log."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from tidelog.metadata.files import ACLS
from tidelog.security.acl import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

FILE_NAME = ACLS.name


def _enum_value(enum: type[IntEnum], value: int) -> IntEnum:
    try:
        return enum(value)
    except ValueError:
        return enum(0)  # UNKNOWN, as Kafka's fromCode does for codes it does not know


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_json(self) -> list[object]:
        return [self.resource_type.name, self.resource_name, self.pattern_type.name, self.principal, self.host,
                self.operation.name, self.permission_type.name]

    @classmethod
    def from_json(cls, doc: list[str]) -> AclBinding:
        return cls(ResourceType[doc[0]], doc[1], PatternType[doc[2]], doc[3], doc[4], AclOperation[doc[5]],
                   AclPermissionType[doc[6]])


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def from_codes(cls, resource_type: int, resource_name: str | None, pattern_type: int, principal: str | None,
                   host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
        return cls(_enum_value(ResourceType, resource_type), resource_name,  # type: ignore[arg-type]
                   _enum_value(PatternType, pattern_type), principal, host,  # type: ignore[arg-type]
                   _enum_value(AclOperation, operation), _enum_value(AclPermissionType, permission_type))  # type: ignore[arg-type]

    def find_indefinite_field(self) -> str | None:
        """Kafka's AclBindingFilter.findIndefiniteField: what makes a filter unusable (UNKNOWN values)."""
        for name, value in (("resourceType", self.resource_type), ("patternType", self.pattern_type),
                            ("operation", self.operation), ("permissionType", self.permission_type)):
            if value == 0:
                return f"{name} is UNKNOWN"
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_resource(acl) and self._matches_entry(acl)

    def _matches_resource(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        name, pattern = self.resource_name, self.pattern_type
        if pattern == PatternType.ANY:
            return name is None or name == acl.resource_name
        if pattern == PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return name == acl.resource_name or acl.resource_name == WILDCARD_RESOURCE
            if acl.pattern_type == PatternType.PREFIXED:
                return name.startswith(acl.resource_name)
            return False
        return pattern == acl.pattern_type and (name is None or name == acl.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission_type in (AclPermissionType.ANY, acl.permission_type))


def validate_new_acl(acl: AclBinding) -> str | None:
    """Why Kafka would refuse to create `acl` (AclControlManager.validateNewAcl), or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return "Invalid resourceType " + acl.resource_type.name
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + acl.pattern_type.name
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return "Invalid operation " + acl.operation.name
    if acl.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return "Invalid permissionType " + acl.permission_type.name
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if acl.pattern_type == PatternType.PREFIXED and acl.resource_name == WILDCARD_RESOURCE:
        return "Wildcard resource names are only allowed with the LITERAL pattern type"
    kind, sep, _ = acl.principal.partition(":")
    if not sep or not kind:
        return f"Could not parse principal from `{acl.principal}` (no colon is present separating the principal type from the principal name)"
    if not acl.host:
        return "Invalid host: the host must not be empty"
    return None


class AclStore:
    """The set of ACL bindings; `listeners` are told after every change (the authorizer re-indexes)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.path = ACLS.path(directory)
        self._lock = threading.Lock()
        self._acls: list[AclBinding] = ACLS.read(
            directory, lambda doc: [AclBinding.from_json(a) for a in doc.get("acls", [])]) or []
        self.listeners: list[Callable[[list[AclBinding]], None]] = []

    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [a for a in self._acls if flt.matches(a)]

    def create(self, acls: Iterable[AclBinding]) -> None:
        with self._lock:
            present = set(self._acls)
            for acl in acls:
                if acl not in present:
                    self._acls.append(acl)
                    present.add(acl)
            self._save_and_notify()

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding matched by several filters is listed under each)."""
        with self._lock:
            matched = [[a for a in self._acls if f.matches(a)] for f in filters]
            gone = {a for group in matched for a in group}
            if gone:
                self._acls = [a for a in self._acls if a not in gone]
                self._save_and_notify()
            return matched

    def _save_and_notify(self) -> None:
        ACLS.write(self.directory, {"acls": [a.to_json() for a in self._acls]})
        for fn in self.listeners:
            fn(list(self._acls))
