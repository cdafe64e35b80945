"""Query-string parsing shared by the JSON API (http.py) and the pages (pages.py): a leaf, so that pages need not
import http, which imports pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.console.backend import ConsoleError

if TYPE_CHECKING:
    from aiohttp import web


def query_int(value: Any, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConsoleError(400, f"{name} must be an integer, not {value!r}") from None


def record_query(request: web.Request) -> dict[str, Any]:
    q = request.query
    return {"partition": query_int(q.get("partition"), "partition") or 0, "offset": q.get("offset") or None,
            "timestamp": query_int(q.get("timestamp"), "timestamp"), "limit": query_int(q.get("limit"), "limit") or 50,
            "key": q.get("key") or None, "value": q.get("value") or None, "header": q.get("header") or None,
            "full": q.get("full") in ("1", "true")}
