"""The console's pages: Jinja2 templates rendered on the server from the same backend functions as /api/.

Write controls (forms that POST/PUT/DELETE through /api/ with the CSRF token) are rendered only when
console.read.only=false; in read-only mode they are absent from the page, not merely disabled.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import jinja2
from aiohttp import web

from tidelog.console import schemas
from tidelog.console.backend import ConsoleError
from tidelog.console.query import query_int, record_query

if TYPE_CHECKING:
    from tidelog.console.http import Console


def _when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _age(ms: int) -> str:
    s = ms // 1000
    return f"{s // 3600}h {s % 3600 // 60}m" if s >= 3600 else f"{s // 60}m {s % 60}s" if s >= 60 else f"{s}s"


class Pages:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.env = jinja2.Environment(loader=jinja2.PackageLoader("tidelog.console", "templates"),
                                      autoescape=True, undefined=jinja2.StrictUndefined)
        self.env.filters["when"] = _when
        self.env.filters["age"] = _age

    def render(self, request: web.Request, name: str, context: dict[str, Any], status: int = 200) -> web.Response:
        user = None
        if self.console.needs_login:
            try:
                credentials = self.console.backend_for(request).credentials
                user = credentials.username if credentials is not None else None
            except Exception:  # noqa: BLE001 - not logged in: the page shows no user
                user = None
        html = self.env.get_template(name).render(
            writes=not self.console.read_only, csrf_token=self.console.csrf_token, path=request.path, user=user,
            schemas=schemas.enabled(self.console.server), **context)
        return web.Response(text=html, status=status, content_type="text/html")


PAGES = web.AppKey("pages", Pages)


def add_page_routes(app: web.Application, console: Console) -> None:
    pages = app[PAGES] = Pages(console)
    r = app.router

    def backend(request: web.Request) -> Any:
        return console.backend_for(request)

    async def overview(request: web.Request) -> web.Response:
        return pages.render(request, "overview.html", {"o": await console.run(backend(request).overview)})

    async def topics(request: web.Request) -> web.Response:
        return pages.render(request, "topics.html", {"topics": await console.run(backend(request).topics)})

    async def topic(request: web.Request) -> web.Response:
        t = await console.run(backend(request).topic, request.match_info["topic"])
        try:
            producers = await console.run(backend(request).producers, request.match_info["topic"])
        except ConsoleError:  # e.g. no READ on the topic for DescribeProducers: the rest of the page stands
            producers = []
        return pages.render(request, "topic.html", {"t": t, "producers": producers})

    async def messages(request: web.Request) -> web.Response:
        query = record_query(request)
        result = await console.run(backend(request).records, request.match_info["topic"], **query)
        return pages.render(request, "messages.html", {"topic": request.match_info["topic"], "q": query,
                                                       "result": result})

    async def groups(request: web.Request) -> web.Response:
        return pages.render(request, "groups.html", {"groups": await console.run(backend(request).groups)})

    async def group(request: web.Request) -> web.Response:
        g = await console.run(backend(request).group, request.match_info["group"])
        return pages.render(request, "group.html", {"g": g})

    async def compaction(request: web.Request) -> web.Response:
        return pages.render(request, "compaction.html", {"rows": await console.run(backend(request).cleaner)})

    async def transactions(request: web.Request) -> web.Response:
        return pages.render(request, "transactions.html",
                            {"transactions": await console.run(backend(request).transactions)})

    async def security(request: web.Request) -> web.Response:
        return pages.render(request, "security.html", {"s": await console.run(backend(request).security)})

    async def quotas(request: web.Request) -> web.Response:
        return pages.render(request, "quotas.html", {"quotas": await console.run(backend(request).quotas)})

    async def schema_subjects(request: web.Request) -> web.Response:
        backend(request)  # behind the login, as every page
        return pages.render(request, "schemas.html", {"subjects": await console.run(schemas.subjects, console.server)})

    async def schema_subject(request: web.Request) -> web.Response:
        backend(request)
        s = await console.run(schemas.subject, console.server, request.match_info["subject"])
        return pages.render(request, "schema_subject.html", {"s": s})

    async def schema_diff(request: web.Request) -> web.Response:
        backend(request)
        d = await console.run(schemas.diff, console.server, request.match_info["subject"],
                              query_int(request.query.get("from"), "from"), query_int(request.query.get("to"), "to"))
        return pages.render(request, "schema_diff.html", {"d": d})

    r.add_get("/schemas", schema_subjects)
    r.add_get("/schemas/{subject}", schema_subject)
    r.add_get("/schemas/{subject}/diff", schema_diff)
    r.add_get("/transactions", transactions)
    r.add_get("/quotas", quotas)
    r.add_get("/security", security)
    r.add_get("/", overview)
    r.add_get("/topics", topics)
    r.add_get("/topics/{topic}", topic)
    r.add_get("/topics/{topic}/messages", messages)
    r.add_get("/groups", groups)
    r.add_get("/groups/{group}", group)
    r.add_get("/compaction", compaction)
