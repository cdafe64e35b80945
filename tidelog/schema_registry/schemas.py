"""The schema library the registry's server calls: parse, canonicalise and compare AVRO, JSON and PROTOBUF schemas.

Confluent's registry (io.confluent.kafka.schemaregistry.ParsedSchema and its CompatibilityChecker) defines the
behaviour; each schema type lives in its own module, imported on first use so that the broker pays nothing for
types nobody registers: `avro.py`, `json_schema.py`, `protobuf.py` (their docstrings list the rules each covers),
and `compatibility.py` (levels, directions, Confluent's message layout). Parsing is cached: the same text with the
same references parses once (an LRU of 1024), so re-registrations and lookups cost a dict hit.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from . import compatibility
from .compatibility import (
    COMPATIBILITY_LEVELS as COMPATIBILITY_LEVELS,  # defined beside the checks, named here too
)

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")



class InvalidSchema(ValueError):
    """The schema text does not parse or is not a valid schema of its type: HTTP 422, error_code 42201."""


@dataclass(frozen=True)
class SchemaReference:
    """A reference from one schema to another registered one (Confluent's SchemaReference)."""

    name: str
    subject: str
    version: int


@runtime_checkable
class ParsedSchema(Protocol):
    schema_type: str  # "AVRO" | "JSON" | "PROTOBUF"

    def canonical(self) -> str:
        """The string stored and returned; equal canonical strings share a schema id."""
        ...

    def normalized(self) -> str:
        """What `?normalize=true` registers and looks up (Confluent's ParsedSchema.normalize())."""
        ...


_MODULES = {"AVRO": "avro", "JSON": "json_schema", "PROTOBUF": "protobuf"}


def parse_schema(schema_type: str, text: str, references: Mapping[str, str] | None = None) -> ParsedSchema:
    """Parse `text` as a schema of `schema_type`; `references` maps each reference name to its schema text.

    Raises InvalidSchema with the reason when the text is not a valid schema of that type.
    """
    kind = (schema_type or "AVRO").upper()
    if kind not in _MODULES:
        raise InvalidSchema(f"Unknown schema type {schema_type!r}; expected one of {', '.join(SCHEMA_TYPES)}")
    return _parse_cached(kind, text, tuple((references or {}).items()))


@functools.lru_cache(maxsize=1024)
def _parse_cached(kind: str, text: str, references: tuple[tuple[str, str], ...]) -> ParsedSchema:
    """Registrations and lookups of a schema already seen (clients re-register on every start) parse once."""
    module = importlib.import_module(f"{__package__}.{_MODULES[kind]}")
    try:
        parsed: ParsedSchema = module.parse(text, dict(references))
    except RecursionError:
        raise InvalidSchema("Invalid schema: nested too deeply") from None
    return parsed


def check_compatibility(
    level: str, new: ParsedSchema, previous: Sequence[ParsedSchema], versions: Sequence[int] | None = None
) -> list[str]:
    """Reasons why `new` may not follow `previous` (oldest first) under `level`; empty when compatible.

    Non-transitive levels compare with the latest previous schema only; transitive ones go newest to oldest and
    stop at the first incompatible one (Confluent's CompatibilityChecker). The reasons are Confluent's verbose
    messages, ending with `{oldSchemaVersion: N}` (when `versions`, the previous schemas' version numbers, are
    given) and `{oldSchema: '...'}`; the server appends `{validateFields: 'false', compatibility: 'LEVEL'}`.
    Raises ValueError for an unknown level.
    """
    return compatibility.check(level, new, previous, versions)
