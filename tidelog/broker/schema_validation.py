"""Confluent Server's broker-side Schema ID Validation: topics with `confluent.value.schema.validation` (resp.
`confluent.key.schema.validation`) true refuse a produced record whose value (resp. key) does not start with
Confluent's wire format (magic byte 0, then a big-endian 4-byte schema id) naming a live version of the subject
that `confluent.value.subject.name.strategy` (resp. key) gives: `<topic>-value` (`<topic>-key`) for the default
TopicNameStrategy, the schema's record name for RecordNameStrategy, `<topic>-<record name>` for
TopicRecordNameStrategy. A null value (a tombstone) or a null key passes, as Confluent documents. A refused record refuses its whole batch with
INVALID_RECORD and a record error (storage/log_validator.py `record_check`).

The ids come from the broker's own Schema Registry (tidelog.schema_registry), read in memory on the broker's loop
(`RegistryState.registered`, no I/O, no lock). With the registry off (`schema.registry.port` -1) a topic cannot
turn validation on (INVALID_CONFIG, as Confluent Server needs `confluent.schema.registry.url` for it); while the
registry is still replaying `_schemas` after a start, such a topic answers the retriable NOT_ENOUGH_REPLICAS; a
topic that kept the config across a restart with the registry off refuses its records (null ones still pass).
"""

from __future__ import annotations

from typing import Protocol

from tidelog.config.log_config import LogConfig
from tidelog.config.topic_config import RECORD_NAME_STRATEGY, TOPIC_NAME_STRATEGY
from tidelog.storage.log_validator import RecordCheck

KEY_VALIDATION = "confluent.key.schema.validation"
VALUE_VALIDATION = "confluent.value.schema.validation"
MAGIC_BYTE = 0
WIRE_HEADER = 5  # the magic byte and the 4-byte schema id


class SchemaIds(Protocol):
    def registered(self, subject: str, schema_id: int) -> bool: ...

    def record_name(self, schema_id: int) -> str | None: ...


def _subject(topic: str, strategy: str, what: str, schema_id: int, ids: SchemaIds) -> str | None:
    """The subject `strategy` names for this record's schema (Confluent's SubjectNameStrategy classes)."""
    if strategy == TOPIC_NAME_STRATEGY:
        return f"{topic}-{what}"
    name = ids.record_name(schema_id)
    if name is None:
        return None
    return name if strategy == RECORD_NAME_STRATEGY else f"{topic}-{name}"


def _refusal(data: bytes, topic: str, strategy: str, ids: SchemaIds | None, what: str) -> str | None:
    if ids is None:
        return f"Record {what} cannot be checked: Schema ID Validation is on but the schema registry is off"
    if len(data) < WIRE_HEADER or data[0] != MAGIC_BYTE:
        return f"Record {what} does not start with the schema registry wire format (magic byte 0 and a schema id)"
    schema_id = int.from_bytes(data[1:WIRE_HEADER], "big", signed=True)
    subject = _subject(topic, strategy, what, schema_id, ids)
    if subject is None:
        return f"Record {what} schema id {schema_id} names no record the subject name strategy can use"
    if not ids.registered(subject, schema_id):
        return f"Record {what} schema id {schema_id} is not registered under subject {subject}"
    return None


def record_check(topic: str, config: LogConfig, ids: SchemaIds | None) -> RecordCheck:
    """The check of one record's key and value for a topic with validation on (`ids` None: the registry is off,
    every checked non-null key or value is refused)."""
    key_strategy = config.confluent_key_subject_name_strategy if config.confluent_key_schema_validation else None
    value_strategy = (config.confluent_value_subject_name_strategy if config.confluent_value_schema_validation
                      else None)

    def check(key: bytes | None, value: bytes | None) -> str | None:
        if key_strategy is not None and key is not None:
            reason = _refusal(key, topic, key_strategy, ids, "key")
            if reason is not None:
                return reason
        if value_strategy is not None and value is not None:
            return _refusal(value, topic, value_strategy, ids, "value")
        return None

    return check
