"""The registry's in-memory state, rebuilt by replaying `_schemas` from its start and kept by applying each record
the registry writes (Confluent's KafkaStoreMessageHandler and LookupCache): subject versions, schemas by id,
compatibility configs and modes.

Only the registry's own thread changes it; nothing here blocks. `registered` and `record_name` are the queries the
broker's event loop makes (Schema ID Validation on produce): `registered` reads `live_ids`, whose per-subject sets
are replaced whole, never changed in place, so a reader on another thread sees one subject's ids before or after a
change, never half; `record_name` reads one schema by id (an id's text never changes) and caches the name.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from tidelog.schema_registry.records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    BadRecord,
    Key,
    SchemaValue,
    decode_key,
    decode_object,
    decode_schema_value,
)

log = logging.getLogger(__name__)

_PROTO_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PROTO_PACKAGE = re.compile(r"\bpackage\s+([\w.]+)\s*;")
_PROTO_MESSAGE = re.compile(r"\bmessage\s+(\w+)")
JSON_DEFAULT_NAME = "record"  # Confluent's JsonSchema.name() without a title

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


def identity(schema_type: str, schema: str, references: list[dict[str, Any]]) -> str:
    """What makes two registrations the same schema (and so the same id): type, text and references."""
    refs = [(str(r.get("name")), str(r.get("subject")), int(r.get("version") or 0)) for r in references]
    return json.dumps([schema_type, schema, refs], separators=(",", ":"))


@dataclass
class RegistryState:
    versions: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)  # subject -> version -> value
    schemas: dict[int, SchemaValue] = field(default_factory=dict)  # id -> a value carrying it (text, type, refs)
    ids: dict[str, int] = field(default_factory=dict)  # identity() -> id
    configs: dict[str | None, dict[str, Any]] = field(default_factory=dict)  # subject (None: global) -> ConfigValue
    modes: dict[str | None, str] = field(default_factory=dict)
    live_ids: dict[str, frozenset[int]] = field(default_factory=dict)  # subject -> ids of its live versions
    max_id: int = 0
    skipped: int = 0  # records that could not be read (logged)
    record_names: dict[int, str | None] = field(default_factory=dict)  # id -> record_name() (the broker's cache)

    # --- replay ------------------------------------------------------------------------------------------

    def apply_raw(self, raw_key: bytes, raw_value: bytes | None) -> None:
        """One `_schemas` record, as read from the log; a record it cannot read is logged and skipped."""
        try:
            self.apply(decode_key(raw_key), raw_value)
        except BadRecord as e:
            self.skipped += 1
            log.warning("Schema registry: skipping a _schemas record it cannot read: %s", e)
        except Exception as e:  # noqa: BLE001 - any client may write to _schemas: one odd record must not stop
            self.skipped += 1   # the registry from starting
            log.warning("Schema registry: skipping a _schemas record it cannot apply: %r", e)

    def apply(self, key: Key, raw_value: bytes | None) -> None:
        if key.keytype == SCHEMA:
            if raw_value is None:
                self._drop_version(key.subject or "", key.version)
            else:
                self.put_version(decode_schema_value(raw_value))
        elif key.keytype == CONFIG:
            if raw_value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = decode_object(raw_value)
        elif key.keytype == MODE:
            mode = decode_object(raw_value).get("mode") if raw_value is not None else None
            if isinstance(mode, str):
                self.modes[key.subject] = mode.upper()
            else:
                self.modes.pop(key.subject, None)
        elif key.keytype == DELETE_SUBJECT and raw_value is not None:
            body = decode_object(raw_value)
            self._soft_delete_subject(str(body.get("subject") or key.subject or ""), body.get("version"))
        elif key.keytype == CLEAR_SUBJECT and raw_value is not None:
            self._clear_subject(str(decode_object(raw_value).get("subject") or key.subject or ""))
        # NOOP, CONTEXT, ASSOC and tombstones of other keytypes change nothing here

    def put_version(self, value: SchemaValue) -> None:
        self.versions.setdefault(value.subject, {})[value.version] = value
        self.schemas.setdefault(value.id, value)
        self.ids.setdefault(identity(value.schema_type, value.schema, value.references), value.id)
        self.max_id = max(self.max_id, value.id)
        self._publish(value.subject)

    def _publish(self, subject: str) -> None:
        """Replace `subject`'s set in `live_ids` (one dict store: atomic for a reader on the broker's loop)."""
        ids = frozenset(v.id for v in self.versions.get(subject, {}).values() if not v.deleted)
        if ids:
            self.live_ids[subject] = ids
        else:
            self.live_ids.pop(subject, None)

    def _drop_version(self, subject: str, version: int) -> None:
        versions = self.versions.get(subject, {})
        value = versions.pop(version, None)
        if not versions:
            self.versions.pop(subject, None)
        self._publish(subject)
        if value is None or self._id_in_use(value.id):
            return
        # no version carries the id any more: the schema is gone (its id is never handed out again)
        gone = self.schemas.pop(value.id, None)
        if gone is not None:
            self.ids.pop(identity(gone.schema_type, gone.schema, gone.references), None)

    def _id_in_use(self, schema_id: int) -> bool:
        return any(v.id == schema_id for versions in self.versions.values() for v in versions.values())

    def _soft_delete_subject(self, subject: str, up_to: Any) -> None:
        for version, value in self.versions.get(subject, {}).items():
            if not isinstance(up_to, int) or version <= up_to:
                value.deleted = True
        self._publish(subject)

    def _clear_subject(self, subject: str) -> None:
        for version in [v for v, value in self.versions.get(subject, {}).items() if value.deleted]:
            self._drop_version(subject, version)

    # --- queries -----------------------------------------------------------------------------------------

    def registered(self, subject: str, schema_id: int) -> bool:
        """Whether a live (not soft-deleted) version of `subject` has this id; safe from any thread."""
        ids = self.live_ids.get(subject)
        return ids is not None and schema_id in ids

    def record_name(self, schema_id: int) -> str | None:
        """The fully-qualified record name of schema `schema_id`, as Confluent's ParsedSchema.name() gives it (what
        RecordNameStrategy names subjects by): an Avro named type's fullname, a JSON Schema's title (else
        "record"), a Protobuf file's first message with its package. None: no such schema, or no name."""
        if schema_id in self.record_names:
            return self.record_names[schema_id]
        value = self.schemas.get(schema_id)
        if value is None:
            return None
        name = _record_name(value.schema_type, value.schema)
        self.record_names[schema_id] = name
        return name

    def subject_versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first (soft-deleted ones only with `deleted`)."""
        versions = self.versions.get(subject, {})
        return [versions[v] for v in sorted(versions) if deleted or not versions[v].deleted]

    def subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.versions if self.subject_versions(s, deleted))

    def compatibility(self, subject: str | None) -> str:
        """The level in force for `subject`: its own, else the global one, else BACKWARD."""
        for scope in ((subject, None) if subject is not None else (None,)):
            level = self.configs.get(scope, {}).get("compatibilityLevel")
            if isinstance(level, str):
                return level.upper()
        return DEFAULT_COMPATIBILITY

    def normalize_default(self, subject: str) -> bool:
        for scope in (subject, None):
            normalize = self.configs.get(scope, {}).get("normalize")
            if isinstance(normalize, bool):
                return normalize
        return False

    def mode(self, subject: str | None) -> str:
        for scope in ((subject, None) if subject is not None else (None,)):
            if scope in self.modes:
                return self.modes[scope]
        return DEFAULT_MODE

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas whose references name this subject version."""
        found = {value.id for versions in self.versions.values() for value in versions.values()
                 if not value.deleted and any(r.get("subject") == subject and r.get("version") == version
                                              for r in value.references)}
        return sorted(found)


def _record_name(schema_type: str, text: str) -> str | None:
    if schema_type == "PROTOBUF":
        body = _PROTO_COMMENTS.sub(" ", text)
        message = _PROTO_MESSAGE.search(body)
        if message is None:
            return None
        package = _PROTO_PACKAGE.search(body)
        return f"{package.group(1)}.{message.group(1)}" if package else message.group(1)
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if schema_type == "JSON":
        title = parsed.get("title") if isinstance(parsed, dict) else None
        return title if isinstance(title, str) else JSON_DEFAULT_NAME
    if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
        return None  # a primitive or a union has no name
    name, namespace = parsed["name"], parsed.get("namespace")
    return name if "." in name or not isinstance(namespace, str) or not namespace else f"{namespace}.{name}"
