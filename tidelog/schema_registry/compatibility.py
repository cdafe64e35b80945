"""Compatibility levels over the per-type reader/writer checks (Confluent's CompatibilityChecker and
SchemaValidatorBuilder): which previous schemas are checked, in which direction, and how reasons are worded."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .schemas import ParsedSchema

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
_MODULES = {"AVRO": "avro", "JSON": "json_schema", "PROTOBUF": "protobuf"}
DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"
_MAX_SCHEMA_IN_MESSAGE = 10 * 1024  # SchemaValidatorBuilder.MAX_SCHEMA_SIZE_FOR_LOGGING


def _can_read(reader: ParsedSchema, writer: ParsedSchema, reader_label: str, writer_label: str) -> list[str]:
    """Why data written with `writer` cannot be read with `reader` (Confluent's isBackwardCompatible)."""
    module = importlib.import_module(f"{__package__}.{_MODULES[reader.schema_type]}")
    try:
        reasons: list[str] = module.reader_writer_incompatibilities(reader, writer, reader_label, writer_label)
    except RecursionError:  # as Confluent's AvroSchema.isBackwardCompatible answers any failure of the check
        return ["Unexpected exception during compatibility check: schemas nested too deeply"]
    return reasons


def _with_old_schema(reasons: list[str], old: ParsedSchema, version: int | None) -> list[str]:
    if reasons:
        if version is not None:
            reasons.append(f"{{oldSchemaVersion: {version}}}")
        text = old.canonical()
        if len(text) <= _MAX_SCHEMA_IN_MESSAGE:
            reasons.append(f"{{oldSchema: '{text}'}}")
        else:
            reasons.append(f"{{oldSchema: <truncated> '{text[:_MAX_SCHEMA_IN_MESSAGE]}...'}}")
    return reasons


def _check_one(backward: bool, forward: bool, new: ParsedSchema, old: ParsedSchema, version: int | None) -> list[str]:
    if new.schema_type != old.schema_type:
        return [DIFFERENT_SCHEMA_TYPE]
    if backward and forward:  # mutualReadStrategy: old reads new (no schema appended), then new reads old
        return _can_read(old, new, "old", "new") + _with_old_schema(_can_read(new, old, "new", "old"), old, version)
    if backward:  # canReadStrategy
        return _with_old_schema(_can_read(new, old, "new", "old"), old, version)
    return _with_old_schema(_can_read(old, new, "old", "new"), old, version)  # canBeReadStrategy


def check(
    level: str, new: ParsedSchema, previous: Sequence[ParsedSchema], versions: Sequence[int] | None = None
) -> list[str]:
    level = level.upper()
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"Unknown compatibility level {level!r}")
    if level == "NONE" or not previous:
        return []
    if versions is not None and len(versions) != len(previous):
        raise ValueError("versions must match previous one for one")
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    # Newest first; a non-transitive level checks the latest only, a transitive one stops at the first failure.
    olds = list(reversed(range(len(previous))))
    if not level.endswith("_TRANSITIVE"):
        olds = olds[:1]
    for i in olds:
        reasons = _check_one(backward, forward, new, previous[i], None if versions is None else versions[i])
        if reasons:
            return reasons
    return []
