"""How the console shows a record's bytes: as text when they are UTF-8, pretty-printed when that text is JSON,
else as hex; long values are cut in lists (the record page shows the whole)."""

from __future__ import annotations

import json
from typing import Any

# a list shows at most this many characters of a key or value; `full` asks for all of it
PREVIEW_CHARS = 1024


def render_bytes(data: bytes | None, full: bool = False) -> dict[str, Any] | None:
    """{"format": text|json|hex, "text": ..., "size": n, "truncated": bool}, or None for a null key/value."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
        fmt = "text"
    except UnicodeDecodeError:
        text, fmt = data.hex(), "hex"
    if fmt == "text" and text[:1] in ("{", "[") and (full or len(text) <= PREVIEW_CHARS):
        try:
            text, fmt = json.dumps(json.loads(text), indent=2, ensure_ascii=False), "json"
        except ValueError:
            pass
    truncated = not full and len(text) > PREVIEW_CHARS
    return {"format": fmt, "text": text[:PREVIEW_CHARS] if truncated else text, "size": len(data),
            "truncated": truncated}


def contains(data: bytes | None, needle: str) -> bool:
    """A substring filter on bytes: the UTF-8 needle in the raw bytes (so it matches text and JSON alike)."""
    return data is not None and needle.encode() in data


def header_matches(headers: list[tuple[str, bytes | None]], needle: str) -> bool:
    """`needle` is found in a header's key or value; "k=v" asks for key k whose value holds v."""
    if "=" in needle:
        key, _, value = needle.partition("=")
        return any(k == key and contains(v, value) for k, v in headers)
    return any(needle in k or contains(v, needle) for k, v in headers)


def record_json(record: Any, full: bool = False) -> dict[str, Any]:
    """A kafka-python ConsumerRecord as the API answers it."""
    headers = list(record.headers or [])
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": "LogAppendTime" if record.timestamp_type == 1 else "CreateTime",
        "key": render_bytes(record.key, full),
        "value": render_bytes(record.value, full),
        "headers": [{"key": k, "value": render_bytes(v, full)} for k, v in headers],
    }
