"""The `_schemas` topic's records in the JSON layout Confluent's registry writes, so that a topic either registry
wrote reads the same (io.confluent.kafka.schemaregistry.storage: SchemaKey/SchemaValue, ConfigKey/ConfigValue,
ModeKey/ModeValue, DeleteSubjectKey/DeleteSubjectValue, ClearSubjectKey/ClearSubjectValue, NoopKey).

Keys carry `keytype`, `subject` (left out when null: Jackson's NON_EMPTY), `version` for SCHEMA, and `magic`
(1 for SCHEMA keys, 0 for the others). Fields are written in Confluent's @JsonPropertyOrder; readers ignore
unknown fields and keytypes (CONTEXT, ASSOC), as Confluent's do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA, CONFIG, MODE, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT = (
    "SCHEMA", "CONFIG", "MODE", "NOOP", "DELETE_SUBJECT", "CLEAR_SUBJECT")


class BadRecord(ValueError):
    """A `_schemas` record this registry cannot read (skipped with a log line at load)."""


@dataclass(frozen=True)
class Key:
    keytype: str
    subject: str | None = None  # None: the global CONFIG / MODE
    version: int = 0  # SCHEMA keys only

    def encode(self) -> bytes:
        body: dict[str, Any] = {"keytype": self.keytype}
        if self.keytype != NOOP and self.subject is not None:
            body["subject"] = self.subject
        if self.keytype == SCHEMA:
            body["version"] = self.version
        body["magic"] = 1 if self.keytype == SCHEMA else 0
        return _dumps(body)


@dataclass
class SchemaValue:
    """One subject version (SchemaValue): `deleted` marks a soft delete; a tombstone is a permanent one."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "subject", "version"}]
    deleted: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # md5, metadata, ruleSet...: kept as read

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":  # Confluent reads a missing schemaType as AVRO
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = self.references
        body.update(self.extra)
        body["schema"] = self.schema
        body["deleted"] = self.deleted
        return body


def encode_value(value: SchemaValue | dict[str, Any] | None) -> bytes | None:
    if value is None:
        return None
    return _dumps(value.to_json() if isinstance(value, SchemaValue) else value)


def decode_key(raw: bytes) -> Key:
    body = _loads(raw)
    keytype = body.get("keytype")
    if not isinstance(keytype, str):
        raise BadRecord(f"key without a keytype: {raw[:200]!r}")
    subject = body.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise BadRecord(f"key with a non-string subject: {raw[:200]!r}")
    version = body.get("version", 0) if keytype == SCHEMA else 0
    if not isinstance(version, int):
        raise BadRecord(f"SCHEMA key with a non-integer version: {raw[:200]!r}")
    return Key(keytype, subject, version)


def decode_schema_value(raw: bytes) -> SchemaValue:
    body = _loads(raw)
    try:
        subject, version, schema_id, schema = body["subject"], body["version"], body["id"], body["schema"]
    except KeyError as e:
        raise BadRecord(f"SCHEMA value without {e}") from None
    if not (isinstance(subject, str) and isinstance(version, int) and isinstance(schema_id, int)
            and isinstance(schema, str)):
        raise BadRecord("SCHEMA value with fields of the wrong type")
    references = body.get("references") or []
    if not isinstance(references, list) or not all(_is_reference(r) for r in references):
        raise BadRecord("SCHEMA value whose references are not a list of {name, subject, version}")
    known = {"subject", "version", "id", "schema", "schemaType", "references", "deleted"}
    return SchemaValue(subject, version, schema_id, schema, str(body.get("schemaType") or "AVRO").upper(),
                       references, bool(body.get("deleted", False)),
                       {k: v for k, v in body.items() if k not in known})


def _is_reference(r: Any) -> bool:
    """A reference as Confluent writes it: {"name": str, "subject": str, "version": int}."""
    return (isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
            and isinstance(r.get("version"), int) and not isinstance(r.get("version"), bool))


def decode_object(raw: bytes) -> dict[str, Any]:
    return _loads(raw)


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRecord(f"not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRecord("not a JSON object")
    return body
