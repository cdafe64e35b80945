"""The console's Schemas view (issue 32): subjects, a subject's versions and a diff between two versions.

Read from the registry's in-memory state through its small read interface (`server.schema_registry.subjects()`
and `.subject(name)`, which run on the registry's own loop and hand back plain data): no HTTP call to the
registry's port and nothing on the broker's loop. Like the registry's own GETs, reads need no registry
credentials; behind a console login they still need one (the HTTP layer asks before calling here).
The diff is difflib's unified diff of the two versions' pretty-printed canonical schema texts.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from tidelog.console.backend import ConsoleError

if TYPE_CHECKING:
    from tidelog.console.view import BrokerServer as Server


def enabled(server: Server) -> bool:
    return int(server.config.get("schema.registry.port")) >= 0


def _registry(server: Server) -> Any:
    if not enabled(server):
        raise ConsoleError(404, "the Schema Registry is off (schema.registry.port=-1)")
    registry = server.schema_registry
    if registry is None:
        raise ConsoleError(503, "the Schema Registry is starting (replaying _schemas)")
    return registry


def subjects(server: Server) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _registry(server).subjects()
    return rows


def subject(server: Server, name: str) -> dict[str, Any]:
    found: dict[str, Any] | None = _registry(server).subject(name)
    if found is None:
        raise ConsoleError(404, f"no subject {name!r}")
    return found


def diff(server: Server, name: str, old: int | None, new: int | None) -> dict[str, Any]:
    """Version `old` -> `new` (default: the latest and the version before it) as a unified diff, and its lines
    classified for the page (`+` added, `-` removed, `@` hunk header, ` ` context)."""
    found = subject(server, name)
    versions = {v["version"]: v for v in found["versions"]}
    numbers = sorted(versions)
    new = numbers[-1] if new is None else new
    if old is None:
        older = [n for n in numbers if n < new]
        old = older[-1] if older else new
    for number in (old, new):
        if number not in versions:
            raise ConsoleError(404, f"subject {name!r} has no version {number}")
    before, after = versions[old], versions[new]
    lines = list(difflib.unified_diff(before["pretty"].splitlines(), after["pretty"].splitlines(),
                                      f"{name} v{old} (id {before['id']})", f"{name} v{new} (id {after['id']})",
                                      lineterm=""))
    return {"subject": name, "from": old, "to": new, "from_id": before["id"], "to_id": after["id"],
            "versions": numbers, "identical": not lines, "diff": "\n".join(lines),
            "lines": [{"kind": _kind(line, i), "text": line} for i, line in enumerate(lines)]}


def _kind(line: str, index: int) -> str:
    if index < 2:  # the ---/+++ file header
        return "file"
    return {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "context")
