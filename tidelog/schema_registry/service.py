"""What each REST call does (Confluent's KafkaSchemaRegistry): registrations, lookups, deletes, configs, modes
and compatibility checks over `RegistryState`, writing through `SchemasTopic`.

Every method runs on the registry's own event loop. Writes take one lock, append their record and wait until
it is durable, and only then change the in-memory state: what a client was told is what the topic holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from tidelog.schema_registry import errors
from tidelog.schema_registry.errors import RegistryError
from tidelog.schema_registry.protobuf_descriptor import descriptor_to_text, text_to_descriptor
from tidelog.schema_registry.records import (
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Key,
    SchemaValue,
    decode_schema_value,
    encode_value,
)
from tidelog.schema_registry.schemas import (
    COMPATIBILITY_LEVELS,
    SCHEMA_TYPES,
    InvalidSchema,
    ParsedSchema,
    check_compatibility,
    parse_schema,
)
from tidelog.schema_registry.state import RegistryState, identity
from tidelog.schema_registry.store import SchemasTopic, StoreError

log = logging.getLogger(__name__)

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
READ_ONLY_MODES = ("READONLY", "READONLY_OVERRIDE")
MAX_VERSION = 2**31 - 1
MAX_REFERENCE_DEPTH = 32


def parse_version(text: str) -> int:
    """A path's version: 1..2^31-1, or -1 for "latest" (also written -1); else 42202."""
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == -1 or 1 <= version <= MAX_VERSION:
        return version
    raise errors.invalid_version(text)


def schema_json(value: SchemaValue, with_subject: bool = True) -> dict[str, Any]:
    """A version as the REST API shows it (Confluent's Schema entity: schemaType left out for AVRO)."""
    body: dict[str, Any] = {"subject": value.subject, "version": value.version} if with_subject else {}
    body["id"] = value.id
    if value.schema_type != "AVRO":
        body["schemaType"] = value.schema_type
    if value.references:
        body["references"] = value.references
    body["schema"] = value.schema
    return body


class RegistryService:
    def __init__(self, topic: SchemasTopic, state: RegistryState | None = None) -> None:
        self.topic = topic
        self.state = state or RegistryState()
        self._write_lock = asyncio.Lock()
        self._parsed: dict[int, ParsedSchema] = {}
        self._serialized: dict[int, str] = {}  # id -> a Protobuf schema's base64 FileDescriptorProto

    # --- writes -------------------------------------------------------------------------------------------

    async def _write(self, records: Sequence[tuple[Key, bytes | None]]) -> None:
        try:
            await self.topic.append([(key.encode(), value) for key, value in records])
        except StoreError as e:
            log.error("Schema registry: writing to _schemas failed: %s", e)
            # The records may be in the log all the same (the append done, its fsync failed): their schema ids
            # are never handed out again, or a replay would give one id two schemas.
            for key, value in records:
                if key.keytype == SCHEMA and value is not None:
                    self.state.max_id = max(self.state.max_id, decode_schema_value(value).id)
            raise RegistryError(errors.STORE_ERROR, f"Error while writing to the Kafka store: {e}") from None
        for key, value in records:
            self.state.apply(key, value)

    def _check_writable(self, subject: str | None) -> None:
        if self.state.mode(subject) in READ_ONLY_MODES:
            raise errors.read_only(subject)

    # --- schemas ------------------------------------------------------------------------------------------

    def _request_schema(self, body: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise errors.invalid_schema("Empty schema")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"Invalid schema type {schema_type}")
        references = body.get("references") or []
        if not isinstance(references, list) or not all(self._valid_reference(r) for r in references):
            raise errors.invalid_schema("Invalid references: each needs a name, a subject and a version")
        return schema_type.upper(), schema, [{"name": r["name"], "subject": r["subject"],
                                              "version": int(r["version"])} for r in references]

    @staticmethod
    def _valid_reference(ref: Any) -> bool:
        return (isinstance(ref, dict) and isinstance(ref.get("name"), str) and isinstance(ref.get("subject"), str)
                and isinstance(ref.get("version"), int) and not isinstance(ref.get("version"), bool))

    def _resolve_references(self, references: list[dict[str, Any]], deleted: bool = True,
                            out: dict[str, str] | None = None, depth: int = 0) -> dict[str, str]:
        """Name -> schema text of every schema `references` reach, dependencies first (what the parser needs).
        A stored schema's references may name soft-deleted versions; a new registration's may not."""
        out = {} if out is None else out
        if depth > MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema("Invalid references: nested too deeply")
        for ref in references:
            value = self._version(ref["subject"], int(ref["version"]), deleted=deleted, missing=None)
            if value is None:
                raise errors.invalid_schema(
                    f"Invalid schema reference {ref['name']}: subject {ref['subject']} version {ref['version']} "
                    "not found")
            if ref["name"] in out:
                continue
            self._resolve_references(value.references, True, out, depth + 1)
            out[ref["name"]] = value.schema
        return out

    def _pin_references(self, references: list[dict[str, Any]]) -> None:
        """A new registration's reference to version -1 names the subject's latest version (stored as such)."""
        for ref in references:
            if ref["version"] == -1:
                latest = self._version(ref["subject"], -1, deleted=False, missing=None)
                if latest is not None:
                    ref["version"] = latest.version

    def _parse(self, schema_type: str, schema: str, references: list[dict[str, Any]]) -> ParsedSchema:
        self._pin_references(references)
        resolved = self._resolve_references(references, deleted=False)
        try:
            return parse_schema(schema_type, schema, resolved)
        except InvalidSchema as e:
            raise errors.invalid_schema(str(e)) from None
        except RecursionError:
            raise errors.invalid_schema("Invalid schema: nested too deeply") from None

    def _parsed_version(self, value: SchemaValue) -> ParsedSchema | None:
        parsed = self._parsed.get(value.id)
        if parsed is None:
            try:
                parsed = parse_schema(value.schema_type, value.schema, self._resolve_references(value.references))
            except (InvalidSchema, RegistryError) as e:
                log.warning("Schema registry: stored schema %d does not parse (%s); compatibility checks skip it",
                            value.id, e)
                return None
            self._parsed[value.id] = parsed
        return parsed

    def _prepare(self, body: Any, normalize: bool) -> tuple[ParsedSchema, SchemaValue]:
        """The request's schema parsed, and the value it would be stored as (subject, version, id unset)."""
        if not isinstance(body, dict):
            raise errors.invalid_schema("Invalid request: expected a JSON object")
        schema_type, schema, references = self._request_schema(body)
        if schema_type == "PROTOBUF":  # confluent-kafka's ProtobufSerializer sends a FileDescriptorProto
            schema = descriptor_to_text(schema) or schema
        parsed = self._parse(schema_type, schema, references)
        text = parsed.normalized() if normalize else parsed.canonical()
        return parsed, SchemaValue("", 0, 0, text, parsed.schema_type, references)

    async def register(self, subject: str, body: Any, normalize: bool = False) -> dict[str, Any]:
        _check_subject(subject)
        async with self._write_lock:
            self._check_writable(subject)
            normalize = normalize or self.state.normalize_default(subject)
            parsed, candidate = self._prepare(body, normalize)
            key = identity(candidate.schema_type, candidate.schema, candidate.references)
            every = self.state.subject_versions(subject, deleted=True)
            for existing in every:
                if not existing.deleted and identity(existing.schema_type, existing.schema,
                                                     existing.references) == key:
                    return {"id": existing.id, "version": existing.version, **_type_of(existing)}
            import_mode = self.state.mode(subject) == "IMPORT"
            wanted_id, wanted_version = body.get("id"), body.get("version")
            if (wanted_id not in (None, -1) or wanted_version not in (None, -1, 0)) and not import_mode:
                raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                    "Subject is not in import mode: a schema id or version cannot be given")
            if not import_mode:
                self._check_compatible(subject, parsed, [v for v in every if not v.deleted])
            elif isinstance(wanted_version, int) and any(v.version == wanted_version for v in every):
                raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                    f"Overwriting version {wanted_version} of subject {subject} is not permitted")
            schema_id = self._choose_id(key, wanted_id)
            version = wanted_version if isinstance(wanted_version, int) and wanted_version > 0 else (
                max((v.version for v in every), default=0) + 1)
            value = SchemaValue(subject, version, schema_id, candidate.schema, candidate.schema_type,
                                candidate.references)
            await self._write([(Key(SCHEMA, subject, version), encode_value(value))])
            self._parsed.setdefault(schema_id, parsed)
            return {"id": schema_id, "version": version, **_type_of(value)}

    def _choose_id(self, key: str, wanted: Any) -> int:
        existing = self.state.ids.get(key)
        if isinstance(wanted, int) and wanted > 0:
            other = self.state.schemas.get(wanted)
            if other is not None and existing != wanted:
                raise RegistryError(42207, f"Schema id {wanted} is already used by a different schema")
            return wanted
        if existing is not None:
            return existing
        return self.state.max_id + 1

    def _check_compatible(self, subject: str, parsed: ParsedSchema, previous: list[SchemaValue]) -> None:
        reasons = self._incompatibilities(self.state.compatibility(subject), parsed, previous)
        if reasons:
            raise RegistryError(errors.INCOMPATIBLE_SCHEMA,
                                f'Schema being registered is incompatible with an earlier schema for subject '
                                f'"{subject}", details: [{", ".join(reasons)}]', status=409)

    def _incompatibilities(self, level: str, parsed: ParsedSchema, previous: list[SchemaValue]) -> list[str]:
        pairs = [(v.version, p) for v, p in ((v, self._parsed_version(v)) for v in previous) if p is not None]
        reasons = check_compatibility(level, parsed, [p for _, p in pairs], [v for v, _ in pairs])
        if reasons:  # Confluent ends the verbose list with the settings the check ran under
            reasons.append(f"{{validateFields: 'false', compatibility: '{level}'}}")
        return reasons

    def lookup(self, subject: str, body: Any, normalize: bool = False, deleted: bool = False) -> dict[str, Any]:
        """POST /subjects/{subject}: the version of `subject` holding this schema."""
        every = self.state.subject_versions(subject, deleted=True)
        if not any(deleted or not v.deleted for v in every):
            raise errors.subject_not_found(subject)
        _, candidate = self._prepare(body, normalize or self.state.normalize_default(subject))
        key = identity(candidate.schema_type, candidate.schema, candidate.references)
        for value in reversed(every):
            if (deleted or not value.deleted) and identity(value.schema_type, value.schema, value.references) == key:
                return schema_json(value)
        raise errors.schema_not_found()

    # --- subjects and versions ----------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.subjects(deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        found = [v.version for v in self.state.subject_versions(subject, deleted)]
        if not found:
            raise errors.subject_not_found(subject)
        return found

    def _version(self, subject: str, version: int, deleted: bool, missing: Any = ...) -> Any:
        """The value of `subject` at `version` (-1: the latest); raises 40401/40402 unless `missing` is given."""
        values = self.state.subject_versions(subject, deleted)
        if not values:
            if missing is not ...:
                return missing
            raise errors.subject_not_found(subject)
        if version == -1:
            return values[-1]
        for value in values:
            if value.version == version:
                return value
        if missing is not ...:
            return missing
        raise errors.version_not_found(version)

    def get_version(self, subject: str, version: int, deleted: bool = False) -> SchemaValue:
        value: SchemaValue = self._version(subject, version, deleted)
        return value

    def referenced_by(self, subject: str, version: int, deleted: bool = False) -> list[int]:
        value = self.get_version(subject, version, deleted)
        return self.state.referenced_by(subject, value.version)

    async def delete_version(self, subject: str, version: int, permanent: bool) -> int:
        async with self._write_lock:
            self._check_writable(subject)
            # a pinned version is found even when soft-deleted (40406 below); "latest" is the latest live one
            value = self.get_version(subject, version, deleted=permanent or version != -1)
            if not permanent and value.deleted:
                raise RegistryError(errors.VERSION_SOFT_DELETED, f"Subject '{subject}' Version {value.version} was "
                                    "soft deleted.Set permanent=true to delete permanently")
            if permanent and not value.deleted:
                raise RegistryError(errors.VERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version {value.version} "
                                    "was not deleted first before being permanently deleted")
            self._check_not_referenced(subject, [value.version])
            key = Key(SCHEMA, subject, value.version)
            if permanent:
                await self._write([(key, None)])  # a tombstone: the cleaner drops the version from the log
            else:
                soft = SchemaValue(value.subject, value.version, value.id, value.schema, value.schema_type,
                                   value.references, True, dict(value.extra))
                await self._write([(key, encode_value(soft))])
            return value.version

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._write_lock:
            self._check_writable(subject)
            every = self.state.subject_versions(subject, deleted=True)
            live = [v for v in every if not v.deleted]
            if not every:
                raise errors.subject_not_found(subject)
            if permanent:
                if live:
                    raise RegistryError(errors.SUBJECT_NOT_SOFT_DELETED, f"Subject '{subject}' was not deleted "
                                        "first before being permanently deleted")
                self._check_not_referenced(subject, [v.version for v in every])
                # newest first (a version may reference an older one of the same subject), then the subject's
                # own mode and config, as Confluent's KafkaSchemaRegistry.deleteSubject does
                tombstones = [(Key(SCHEMA, subject, v.version), None) for v in reversed(every)]
                if subject in self.state.modes:
                    tombstones.append((Key(MODE, subject), None))
                if subject in self.state.configs:
                    tombstones.append((Key(CONFIG, subject), None))
                await self._write(tombstones)
                return [v.version for v in every]
            if not live:
                raise RegistryError(errors.SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted."
                                    "Set permanent=true to delete permanently")
            self._check_not_referenced(subject, [v.version for v in live])
            latest = live[-1].version
            await self._write([(Key(DELETE_SUBJECT, subject),
                                encode_value({"subject": subject, "version": latest}))])
            return [v.version for v in live]

    def _check_not_referenced(self, subject: str, versions: list[int]) -> None:
        for version in versions:
            if self.state.referenced_by(subject, version):
                raise RegistryError(errors.REFERENCE_EXISTS, "One or more references exist to the schema "
                                    f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}.")

    def formatted(self, value: SchemaValue, fmt: str) -> SchemaValue:
        """`value` with its schema in the asked `?format=`: "serialized" gives a Protobuf schema as the base64
        FileDescriptorProto confluent-kafka's serdes read; other formats and types answer the stored text."""
        if fmt != "serialized" or value.schema_type != "PROTOBUF":
            return value
        serialized = self._serialized.get(value.id)
        if serialized is None:
            try:
                serialized = text_to_descriptor(value.schema, self._resolve_references(value.references))
            except (ValueError, TypeError, AttributeError) as e:
                raise errors.invalid_schema(f"Invalid schema: cannot serialize it: {e}") from None
            self._serialized[value.id] = serialized
        return SchemaValue(value.subject, value.version, value.id, serialized, value.schema_type,
                           value.references, value.deleted, value.extra)

    # --- schemas by id ------------------------------------------------------------------------------------

    def schema_by_id(self, schema_id: int) -> SchemaValue:
        value = self.state.schemas.get(schema_id)
        if value is None:
            raise errors.schema_not_found(schema_id)
        return value

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[dict[str, Any]]:
        self.schema_by_id(schema_id)
        return [{"subject": v.subject, "version": v.version}
                for s in sorted(self.state.versions) for v in self.state.subject_versions(s, deleted)
                if v.id == schema_id]

    # --- configs and modes ----------------------------------------------------------------------------------

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        config = self.state.configs.get(subject)
        if config is None and subject is not None and not default_to_global:
            raise RegistryError(errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                                f"Subject '{subject}' does not have subject-level compatibility configured")
        if config is None:
            config = self.state.configs.get(None, {})
        body = {k: v for k, v in config.items() if k != "subject"}
        body.setdefault("compatibilityLevel", self.state.compatibility(None))
        return body

    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if subject is not None:
            _check_subject(subject)
        if not isinstance(body, dict):
            raise errors.invalid_compatibility()
        level = body.get("compatibility", body.get("compatibilityLevel"))
        normalize = body.get("normalize")
        if level is None and normalize is None:
            raise errors.invalid_compatibility()
        if level is not None and (not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS):
            raise errors.invalid_compatibility()
        if normalize is not None and not isinstance(normalize, bool):
            raise RegistryError(42203, "normalize must be true or false")
        async with self._write_lock:
            self._check_writable(subject)
            value = dict(self.state.configs.get(subject, {}))
            value.pop("subject", None)
            if level is not None:
                value["compatibilityLevel"] = level.upper()
            if normalize is not None:
                value["normalize"] = normalize
            stored = ({"subject": subject} if subject is not None else {}) | value
            await self._write([(Key(CONFIG, subject), encode_value(stored))])
        answer: dict[str, Any] = {"compatibility": value.get("compatibilityLevel", self.state.compatibility(None))}
        if "normalize" in value:
            answer["normalize"] = value["normalize"]
        return answer

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        async with self._write_lock:
            self._check_writable(subject)
            previous = self.get_config(subject)
            if subject is None and not self.state.configs.get(None):
                return previous
            await self._write([(Key(CONFIG, subject), None)])
            return previous

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is not None and subject not in self.state.modes and not default_to_global:
            raise RegistryError(errors.SUBJECT_MODE_NOT_CONFIGURED,
                                f"Subject '{subject}' does not have subject-level mode configured")
        return {"mode": self.state.mode(subject)}

    async def set_mode(self, subject: str | None, body: Any, force: bool = False) -> dict[str, Any]:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode()
        mode = mode.upper()
        async with self._write_lock:
            if mode == "IMPORT" and not force and (
                    self.state.subject_versions(subject, True) if subject is not None else self.state.versions):
                raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                    "Cannot import since found existing subjects")
            stored = ({"subject": subject} if subject is not None else {}) | {"mode": mode}
            await self._write([(Key(MODE, subject), encode_value(stored))])
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        async with self._write_lock:
            previous = self.get_mode(subject)
            await self._write([(Key(MODE, subject), None)])
            return previous

    # --- compatibility ------------------------------------------------------------------------------------

    def test_compatibility(self, subject: str, version: int | None, body: Any, verbose: bool = False,
                           normalize: bool = False) -> dict[str, Any]:
        """POST /compatibility/subjects/{subject}/versions[/{version}]: the new schema against one version,
        or (no version) against those the subject's level names."""
        if version is None:
            previous = self.state.subject_versions(subject)
        else:
            previous = [self.get_version(subject, version)]
        parsed, _ = self._prepare(body, normalize)
        reasons = self._incompatibilities(self.state.compatibility(subject), parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not reasons}
        if verbose:
            answer["messages"] = reasons
        return answer


def _type_of(value: SchemaValue) -> dict[str, Any]:
    return {"schemaType": value.schema_type} if value.schema_type != "AVRO" else {}


def _check_subject(subject: str) -> None:
    """Confluent refuses subjects with control characters and the reserved name of its global context."""
    if not subject or any(ord(c) < 0x20 for c in subject) or subject == "__GLOBAL":
        raise RegistryError(errors.INVALID_SUBJECT, f"The specified subject '{subject}' is not a valid.")
