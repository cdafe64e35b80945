"""Confluent Schema Registry's REST API on `schema.registry.port` (HTTPS when the broker has a TLS listener): aiohttp on its own thread and event loop (as
the console's), so parsing and comparing schemas never runs on the broker's loop; appends go to the broker's
loop (`SchemasTopic.append`). Paths, payloads, content type and error bodies follow Confluent's
(io.confluent.kafka.schemaregistry.rest.resources: SubjectsResource, SubjectVersionsResource, SchemasResource,
ConfigResource, ModeResource, CompatibilityResource).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

from tidelog.schema_registry import errors, snapshot
from tidelog.schema_registry.auth import BasicAuth
from tidelog.schema_registry.errors import RegistryError
from tidelog.schema_registry.schemas import SCHEMA_TYPES
from tidelog.schema_registry.service import RegistryService, parse_version, schema_json
from tidelog.schema_registry.state import RegistryState
from tidelog.schema_registry.store import SchemasTopic
from tidelog.schema_registry.view import BrokerServer
from tidelog.security.ssl_context import create_server_context

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 8 << 20  # a larger request answers 422/42209 (schema too large), never a crash
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")


def answer(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), status=status,
                        content_type=CONTENT_TYPE)


def error_answer(error: RegistryError) -> web.Response:
    return answer(error.body(), error.status)


@web.middleware
async def confluent_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as Confluent's {"error_code", "message"} body; an unexpected one is 500/50001, logged."""
    try:
        return await handler(request)
    except RegistryError as e:
        return error_answer(e)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return answer({"error_code": e.status, "message": f"HTTP {e.status} {e.reason}"}, e.status)
    except Exception as e:  # noqa: BLE001 - one failed request, never the registry
        log.exception("Schema registry request %s %s failed", request.method, request.path)
        # the details go to the log only: an exception's text may carry what a client must not see
        return error_answer(RegistryError(errors.STORE_ERROR, f"Internal error ({type(e).__name__})", status=500))


async def read_json(request: web.Request) -> Any:
    """The body as JSON: 400 when it is not JSON (Confluent's Jackson parse error), 422/42209 when too large."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise RegistryError(errors.SCHEMA_TOO_LARGE, "Register operation failed because schema is too large",
                            status=422) from None
    if not raw.strip():
        raise RegistryError(400, "Request body is empty: a JSON object was expected")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise RegistryError(400, f"Unrecognized JSON: {e}") from None


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def schema_id(request: web.Request) -> int:
    text = request.match_info["id"]
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found(text) from None


def is_write(request: web.Request) -> bool:
    """Registrations, deletes and config or mode changes (lookups and compatibility checks POST too, but read)."""
    if request.method in ("PUT", "DELETE"):
        return True
    return request.method == "POST" and request.path.startswith("/subjects/") and request.path.endswith("/versions")


def authentication(auth: BasicAuth) -> Any:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            auth.principal(request.headers.get("Authorization"), is_write(request))
        except RegistryError as e:
            response = error_answer(e)
            response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
            return response
        return await handler(request)

    return check


def build_app(service: RegistryService, auth: BasicAuth | None = None) -> web.Application:
    middlewares = [confluent_errors] + ([authentication(auth)] if auth is not None and auth.enabled else [])
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    r = app.router

    def subject(request: web.Request) -> str:
        return request.match_info["subject"]

    def version(request: web.Request) -> int:
        return parse_version(request.match_info["version"])

    async def root(request: web.Request) -> web.Response:
        return answer({})

    async def list_subjects(request: web.Request) -> web.Response:
        return answer(service.subjects(flag(request, "deleted"), request.query.get("subjectPrefix", "")))

    async def list_versions(request: web.Request) -> web.Response:
        return answer(service.versions(subject(request), flag(request, "deleted")))

    async def register(request: web.Request) -> web.Response:
        body = await read_json(request)
        return answer(await service.register(subject(request), body, flag(request, "normalize")))

    async def lookup(request: web.Request) -> web.Response:
        body = await read_json(request)
        return answer(service.lookup(subject(request), body, flag(request, "normalize"), flag(request, "deleted")))

    async def delete_subject(request: web.Request) -> web.Response:
        return answer(await service.delete_subject(subject(request), flag(request, "permanent")))

    def fmt(request: web.Request) -> str:
        return request.query.get("format", "")

    async def get_version(request: web.Request) -> web.Response:
        value = service.get_version(subject(request), version(request), flag(request, "deleted"))
        return answer(schema_json(service.formatted(value, fmt(request))))

    async def get_version_schema(request: web.Request) -> web.Response:
        value = service.get_version(subject(request), version(request), flag(request, "deleted"))
        return web.Response(text=value.schema, content_type=CONTENT_TYPE)

    async def referenced_by(request: web.Request) -> web.Response:
        return answer(service.referenced_by(subject(request), version(request), flag(request, "deleted")))

    async def delete_version(request: web.Request) -> web.Response:
        return answer(await service.delete_version(subject(request), version(request), flag(request, "permanent")))

    async def get_schema(request: web.Request) -> web.Response:
        value = service.formatted(service.schema_by_id(schema_id(request)), fmt(request))
        return answer({k: v for k, v in schema_json(value, with_subject=False).items() if k != "id"})

    async def get_schema_text(request: web.Request) -> web.Response:
        return web.Response(text=service.schema_by_id(schema_id(request)).schema, content_type=CONTENT_TYPE)

    async def get_schema_versions(request: web.Request) -> web.Response:
        return answer(service.id_versions(schema_id(request), flag(request, "deleted")))

    async def get_schema_subjects(request: web.Request) -> web.Response:
        versions = service.id_versions(schema_id(request), flag(request, "deleted"))
        return answer(sorted({v["subject"] for v in versions}))

    async def schema_types(request: web.Request) -> web.Response:
        return answer(list(SCHEMA_TYPES))

    def config_subject(request: web.Request) -> str | None:
        return request.match_info.get("subject")

    async def get_config(request: web.Request) -> web.Response:
        return answer(service.get_config(config_subject(request), flag(request, "defaultToGlobal")))

    async def put_config(request: web.Request) -> web.Response:
        body = await read_json(request)
        return answer(await service.set_config(config_subject(request), body))

    async def delete_config(request: web.Request) -> web.Response:
        return answer(await service.delete_config(config_subject(request)))

    async def get_mode(request: web.Request) -> web.Response:
        return answer(service.get_mode(config_subject(request), flag(request, "defaultToGlobal")))

    async def put_mode(request: web.Request) -> web.Response:
        body = await read_json(request)
        return answer(await service.set_mode(config_subject(request), body, flag(request, "force")))

    async def delete_mode(request: web.Request) -> web.Response:
        return answer(await service.delete_mode(subject(request)))

    async def compatibility(request: web.Request) -> web.Response:
        body = await read_json(request)
        pinned = request.match_info.get("version")
        return answer(service.test_compatibility(subject(request), None if pinned is None else parse_version(pinned),
                                                 body, flag(request, "verbose"), flag(request, "normalize")))

    r.add_get("/", root)
    r.add_get("/subjects", list_subjects)
    r.add_post("/subjects/{subject}", lookup)
    r.add_delete("/subjects/{subject}", delete_subject)
    r.add_get("/subjects/{subject}/versions", list_versions)
    r.add_post("/subjects/{subject}/versions", register)
    r.add_get("/subjects/{subject}/versions/{version}", get_version)
    r.add_delete("/subjects/{subject}/versions/{version}", delete_version)
    r.add_get("/subjects/{subject}/versions/{version}/schema", get_version_schema)
    r.add_get("/subjects/{subject}/versions/{version}/referencedby", referenced_by)
    r.add_get("/schemas/types", schema_types)
    r.add_get("/schemas/ids/{id}", get_schema)
    r.add_get("/schemas/ids/{id}/schema", get_schema_text)
    r.add_get("/schemas/ids/{id}/versions", get_schema_versions)
    r.add_get("/schemas/ids/{id}/subjects", get_schema_subjects)
    for path in ("/config", "/config/{subject}"):
        r.add_get(path, get_config)
        r.add_put(path, put_config)
        r.add_delete(path, delete_config)
    for path in ("/mode", "/mode/{subject}"):
        r.add_get(path, get_mode)
        r.add_put(path, put_mode)
    r.add_delete("/mode/{subject}", delete_mode)
    r.add_post("/compatibility/subjects/{subject}/versions", compatibility)
    r.add_post("/compatibility/subjects/{subject}/versions/{version}", compatibility)
    return app


class SchemaRegistryHttp:
    """The registry: `_schemas` replayed, then the aiohttp site on its own thread and loop. Built by
    `start_schema_registry` on a worker thread (blocking: topic creation and the replay read the log)."""

    def __init__(self, server: BrokerServer, broker_loop: asyncio.AbstractEventLoop, host: str, port: int) -> None:
        self.topic = SchemasTopic(server.broker, broker_loop)
        self.topic.ensure_topic()
        state = RegistryState()
        records = 0
        for key, value in self.topic.read_all():
            state.apply_raw(key, value)
            records += 1
        self.service = RegistryService(self.topic, state)
        self.auth = BasicAuth(server.security, server.broker.clock)
        self.ssl_context = https_context(server)
        log.info("Schema registry: read %d _schemas record(s): %d subject(s), %d schema(s), next id %d",
                 records, len(state.versions), len(state.schemas), state.max_id + 1)
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.host = host
        self.port = 0
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(host, port, started),
                                        name="tidelog-schema-registry", daemon=True)
        self._thread.start()
        self.port = started.result(timeout=60)
        log.info("Schema registry listening on http://%s:%d", host, self.port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.ssl_context is not None else 'http'}://{host}:{self.port}"

    def _main(self, host: str, port: int, started: concurrent.futures.Future[int]) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            bound = self.loop.run_until_complete(self._start(host, port))
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            started.set_exception(exc)
            self.loop.close()
            return
        started.set_result(bound)
        self.loop.run_forever()
        self.loop.run_until_complete(self._stop())
        self.loop.close()

    async def _start(self, host: str, port: int) -> int:
        self._runner = web.AppRunner(build_app(self.service, self.auth), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True, ssl_context=self.ssl_context)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def read(self, fn: Callable[..., T], *args: Any, timeout: float = 30.0) -> T:
        """`fn(state, *args)` run on the registry's loop (the only thread that changes the state) and its result
        handed back: how another thread (the console) reads the registry without racing its writes (blocking)."""
        if not self._thread.is_alive():
            raise RuntimeError("the schema registry has stopped")
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(self.service.state, *args))
            except BaseException as exc:  # noqa: BLE001 - handed to the reader
                done.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return done.result(timeout)

    def subjects(self) -> list[dict[str, Any]]:
        """Every live subject's summary (tidelog.schema_registry.snapshot.subjects), for the console."""
        return self.read(snapshot.subjects)

    def subject(self, name: str) -> dict[str, Any] | None:
        """A subject with all its versions and their pretty-printed schemas; None when unknown."""
        return self.read(snapshot.subject, name)

    def shutdown(self) -> None:
        """Stop serving (blocking: call it off the broker's loop, before the broker's logs close)."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)


def https_context(server: BrokerServer) -> ssl.SSLContext | None:
    """With a TLS listener the registry speaks HTTPS with that listener's certificate (its first one); clients
    are not asked for certificates: Basic credentials authenticate them."""
    for name, sec in server.security.listeners.items():
        if sec.uses_tls:
            context = create_server_context(server.config, name)
            context.verify_mode = ssl.CERT_NONE
            return context
    return None


def start_schema_registry(server: BrokerServer, broker_loop: asyncio.AbstractEventLoop, host: str,
                          port: int) -> SchemaRegistryHttp:
    return SchemaRegistryHttp(server, broker_loop, host, port)
