"""Plain-data views of the registry's state for readers on other threads (the web console's Schemas pages).

`SchemaRegistryHttp.read` runs these on the registry's own event loop, the only thread that changes
`RegistryState`, so a reader never sees a half-applied write; what it gets back is dicts and strings it may keep.
No HTTP round trip through the registry's port, no lock on the broker's loop.
"""

from __future__ import annotations

import json
from typing import Any

from tidelog.schema_registry.records import SchemaValue
from tidelog.schema_registry.state import RegistryState


def pretty(schema_type: str, text: str) -> str:
    """The stored (canonical) schema text indented for people: AVRO and JSON as 2-space JSON, Protobuf as it is."""
    if schema_type == "PROTOBUF":
        return text if text.endswith("\n") else text + "\n"
    try:
        return json.dumps(json.loads(text), indent=2) + "\n"
    except ValueError:
        return text


def version_view(value: SchemaValue) -> dict[str, Any]:
    return {"version": value.version, "id": value.id, "schema_type": value.schema_type,
            "references": [dict(r) for r in value.references], "deleted": value.deleted,
            "schema": value.schema, "pretty": pretty(value.schema_type, value.schema)}


def subjects(state: RegistryState) -> list[dict[str, Any]]:
    """Every live subject: its latest live version, id, type, version count and the compatibility in force."""
    rows = []
    for subject in state.subjects():
        live = state.subject_versions(subject)
        latest = live[-1]
        rows.append({"subject": subject, "latest_version": latest.version, "id": latest.id,
                     "schema_type": latest.schema_type, "versions": len(live),
                     "compatibility": state.compatibility(subject), "mode": state.mode(subject)})
    return rows


def subject(state: RegistryState, name: str) -> dict[str, Any] | None:
    """A subject with all its versions (soft-deleted ones flagged), oldest first; None when it has none."""
    versions = state.subject_versions(name, deleted=True)
    if not versions:
        return None
    return {"subject": name, "compatibility": state.compatibility(name), "mode": state.mode(name),
            "compatibility_set": name in state.configs, "versions": [version_view(v) for v in versions]}
