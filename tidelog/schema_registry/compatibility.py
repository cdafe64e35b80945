"""Compatibility levels over the per-type reader/writer checks (Confluent's CompatibilityChecker)."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .schemas import ParsedSchema

_MODULES = {"AVRO": "avro", "JSON": "json_schema", "PROTOBUF": "protobuf"}


def _reader_writer(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why data written with `writer` cannot be read with `reader`."""
    if reader.schema_type != writer.schema_type:
        return [f"Incompatible because of different schema type: {writer.schema_type} -> {reader.schema_type}"]
    module = importlib.import_module(f"{__package__}.{_MODULES[reader.schema_type]}")
    reasons: list[str] = module.reader_writer_incompatibilities(reader, writer)
    return reasons


def check(level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    from .schemas import COMPATIBILITY_LEVELS

    level = level.upper()
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"Unknown compatibility level {level!r}")
    if level == "NONE" or not previous:
        return []
    # Non-transitive levels: only the latest; transitive ones: every previous version, newest first as Confluent.
    olds = list(reversed(previous)) if level.endswith("_TRANSITIVE") else [previous[-1]]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    reasons: list[str] = []
    for old in olds:
        if backward:
            reasons += _reader_writer(new, old)
        if forward:
            reasons += _reader_writer(old, new)
    return reasons
