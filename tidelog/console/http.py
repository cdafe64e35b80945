"""The broker's HTTP port when the console is on: aiohttp on its own thread and event loop, serving /metrics,
the JSON routes other subsystems add (e.g. /api/cleaner), the console's /api/ and its pages.

Nothing here runs on the broker's event loop: handlers hand the blocking work (a kafka-python request over
loopback, a Prometheus scrape, the cleaner's explanation) to a small thread pool, so a slow page costs the
broker no more than a client's request does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hmac
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from tidelog.console import schemas
from tidelog.console.backend import Backend, ConsoleError, Credentials
from tidelog.console.pages import PAGES, add_page_routes
from tidelog.console.query import query_int, record_query

if TYPE_CHECKING:
    from tidelog.console.view import BrokerServer as Server

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
WORKERS = 4
SESSION_COOKIE = "tidelog_console"
MAX_SESSIONS = 64  # the oldest login is dropped beyond this
LOGIN_TIMEOUT_MS = 5_000  # a wrong password is refused within this
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Console:
    """The state one console's handlers share: the broker, the backends, the CSRF token, the worker pool.

    Without SASL listeners every request uses one backend on a PLAINTEXT listener. With one, the console asks
    for the same credentials the broker accepts (PLAIN or SCRAM users): a login makes a backend whose clients
    authenticate as that user on a SASL_PLAINTEXT listener, kept under a random session cookie, so the
    broker's ACLs for that principal decide what the user sees and does."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.started_s = time.time()
        self.backend = Backend(server, started_s=self.started_s)
        self.csrf_token = secrets.token_urlsafe(32)
        self.executor = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="tidelog-console")
        self.sasl_listener, self.mechanisms = _sasl_listener(server)
        self.sessions: OrderedDict[str, Backend] = OrderedDict()
        self._sessions_lock = threading.Lock()

    @property
    def read_only(self) -> bool:
        return bool(self.server.config.get("console.read.only"))

    @property
    def needs_login(self) -> bool:
        return self.sasl_listener is not None

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn` on a worker thread (never this loop, never the broker's)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor,
                                                                functools.partial(fn, *args, **kwargs))

    def backend_for(self, request: web.Request) -> Backend:
        """The backend acting for this request's user; 401 when the broker has SASL and nobody logged in."""
        if not self.needs_login:
            return self.backend
        with self._sessions_lock:
            backend = self.sessions.get(request.cookies.get(SESSION_COOKIE, ""))
        if backend is None:
            raise ConsoleError(401, "log in first, with a user name and password the broker accepts")
        return backend

    def login(self, username: str, password: str, mechanism: str) -> str:
        """A new session id once the broker accepts the credentials (blocking: a worker thread calls it)."""
        if self.sasl_listener is None:
            raise ConsoleError(400, "this broker has no SASL listener: no login needed")
        if mechanism not in self.mechanisms:
            raise ConsoleError(400, f"mechanism must be one of {', '.join(self.mechanisms)}")
        if not username or not password:
            raise ConsoleError(401, "login refused: wrong user name or password")
        backend = Backend(self.server, Credentials(self.sasl_listener, mechanism, username, password),
                          started_s=self.started_s)
        backend.check_login(LOGIN_TIMEOUT_MS)
        session = secrets.token_urlsafe(32)
        with self._sessions_lock:
            self.sessions[session] = backend
            evicted = [self.sessions.popitem(last=False)[1] for _ in range(len(self.sessions) - MAX_SESSIONS)]
        for old in evicted:
            old.close()
        return session

    def logout(self, request: web.Request) -> None:
        with self._sessions_lock:
            backend = self.sessions.pop(request.cookies.get(SESSION_COOKIE, ""), None)
        if backend is not None:
            backend.close()

    def check_token(self, request: web.Request, body: dict[str, Any]) -> None:
        """403 unless the request carries this console's CSRF token (a header, or a form's csrf_token field)
        from a page of this origin: a cross-site form can neither read the token nor set the header."""
        token = request.headers.get("X-CSRF-Token") or str(body.get("csrf_token") or "")
        if not hmac.compare_digest(token.encode(), self.csrf_token.encode()):
            raise ConsoleError(403, "missing or wrong CSRF token")
        origin = request.headers.get("Origin")
        if origin and origin.split("://", 1)[-1] != request.host:
            raise ConsoleError(403, f"cross-origin request from {origin} refused")

    def check_write(self, request: web.Request, body: dict[str, Any]) -> None:
        """403 unless writes are on (console.read.only=false) and the CSRF checks pass."""
        if self.read_only:
            raise ConsoleError(403, "the console is read-only (the broker has console.read.only=true)")
        self.check_token(request, body)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        with self._sessions_lock:
            backends = [self.backend, *self.sessions.values()]
            self.sessions.clear()
        for backend in backends:
            backend.close()


def _sasl_listener(server: Server) -> tuple[str | None, list[str]]:
    """The SASL_PLAINTEXT listener the console logs users in on (None: no SASL listener, no login), and its
    mechanisms. A broker whose only SASL listeners use TLS still needs a login; the console then refuses."""
    sasl = [(name, sec) for name, sec in server.security.listeners.items() if sec.uses_sasl]
    for name, sec in sasl:
        if sec.protocol == "SASL_PLAINTEXT":
            return name, list(sec.mechanisms)
    return ("", []) if sasl else (None, [])


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body, default=str).encode(), status=status,
                        content_type="application/json")


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ConsoleError as e:
        if request.path.startswith("/api/"):
            return json_response({"error": e.message}, e.status)
        if e.status == 401:
            raise web.HTTPFound("/login?" + urlencode({"next": request.path_qs})) from None
        pages = request.app[PAGES]
        return pages.render(request, "error.html", {"status": e.status, "message": e.message}, e.status)
    except web.HTTPException:
        raise
    except Exception as e:  # noqa: BLE001 - one failed request, never the endpoint
        log.exception("Console request %s %s failed", request.method, request.path)
        return json_response({"error": repr(e)}, 500)


async def read_body(request: web.Request) -> dict[str, Any]:
    if not request.can_read_body:
        return {}
    if request.content_type == "application/json":
        try:
            body = await request.json()
        except ValueError:
            raise ConsoleError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise ConsoleError(400, "the body must be a JSON object")
        return body
    return dict(await request.post())


def build_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[errors], client_max_size=8 << 20)
    metrics = console.server.metrics
    r = app.router

    async def prometheus(request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = await console.run(encoder, metrics.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def extra_json(request: web.Request) -> web.Response:
        """A route added by add_json_route (e.g. /api/cleaner), looked up at request time; behind the login,
        and /api/cleaner shows the user's topics only."""
        route = metrics.json_routes.get(request.path)
        if route is None:
            raise ConsoleError(404, f"no route {request.path}")
        backend = console.backend_for(request)
        if request.path == "/api/cleaner":
            return json_response(await console.run(backend.cleaner))
        result = await console.run(route)
        return web.Response(body=result if isinstance(result, bytes) else json.dumps(result).encode(),
                            content_type="application/json")

    def reader(fn: Callable[[Backend, web.Request], Any]) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            return json_response(await console.run(fn, console.backend_for(request), request))
        return handle

    def writer(fn: Callable[[Backend, web.Request, dict[str, Any]], Any], status: int = 200) -> Handler:
        async def handle(request: web.Request) -> web.Response:
            body = await read_body(request)
            console.check_write(request, body)
            return json_response(await console.run(fn, console.backend_for(request), request, body), status)
        return handle

    async def session(request: web.Request) -> web.Response:
        """The CSRF token for scripts (only a same-origin page or a non-browser client can read it)."""
        if console.needs_login:
            console.backend_for(request)
        return json_response({"csrf_token": console.csrf_token, "read_only": console.read_only,
                              "login": console.needs_login})

    async def login(request: web.Request) -> web.StreamResponse:
        """POST /api/login {"username", "password", "mechanism"} (or the login page's form, which also
        carries the CSRF token): sets the session cookie."""
        body = await read_body(request)
        is_form = request.content_type != "application/json"
        if is_form:
            console.check_token(request, body)
        try:
            session_id = await console.run(console.login, str(body.get("username") or ""),
                                           str(body.get("password") or ""),
                                           str(body.get("mechanism") or (console.mechanisms or [""])[-1]))
        except ConsoleError as e:
            if not is_form:
                raise
            pages = request.app[PAGES]
            return pages.render(request, "login.html", {"error": e.message, "mechanisms": console.mechanisms,
                                                        "next": _local(str(body.get("next") or "/"))}, e.status)
        if is_form:
            redirect = web.HTTPFound(_local(str(body.get("next") or "/")))
            redirect.set_cookie(SESSION_COOKIE, session_id, httponly=True, samesite="Strict", path="/")
            raise redirect
        response = json_response({"csrf_token": console.csrf_token, "read_only": console.read_only})
        response.set_cookie(SESSION_COOKIE, session_id, httponly=True, samesite="Strict", path="/")
        return response

    async def logout(request: web.Request) -> web.StreamResponse:
        console.check_token(request, await read_body(request))
        console.logout(request)
        redirect = web.HTTPFound("/login")
        redirect.del_cookie(SESSION_COOKIE, path="/")
        raise redirect

    async def login_page(request: web.Request) -> web.Response:
        return request.app[PAGES].render(request, "login.html", {"error": None, "mechanisms": console.mechanisms,
                                                                 "next": _local(request.query.get("next", "/"))})

    r.add_get("/metrics", prometheus)
    r.add_get("/login", login_page)
    r.add_post("/api/login", login)
    r.add_post("/logout", logout)
    r.add_get("/api/session", session)
    r.add_get("/api/overview", reader(lambda b, q: b.overview()))
    r.add_get("/api/traffic", reader(lambda b, q: b.traffic()))
    r.add_get("/api/topics", reader(lambda b, q: b.topics()))
    r.add_post("/api/topics", writer(_create_topic, 201))
    r.add_get("/api/topics/{topic}", reader(lambda b, q: b.topic(q.match_info["topic"])))
    r.add_delete("/api/topics/{topic}", writer(lambda b, q, body: b.delete_topic(q.match_info["topic"])))
    r.add_get("/api/topics/{topic}/records", reader(_records))
    r.add_post("/api/topics/{topic}/records", writer(_produce, 201))
    alter = writer(lambda b, q, body: b.alter_topic_configs(q.match_info["topic"], _configs(body)))
    r.add_put("/api/topics/{topic}/configs", alter)
    r.add_post("/api/topics/{topic}/configs", alter)
    r.add_get("/api/topics/{topic}/producers", reader(lambda b, q: b.producers(q.match_info["topic"])))
    r.add_get("/api/transactions", reader(lambda b, q: b.transactions()))
    r.add_get("/api/security", reader(lambda b, q: b.security()))
    r.add_get("/api/quotas", reader(lambda b, q: b.quotas()))
    r.add_get("/api/groups", reader(lambda b, q: b.groups()))
    r.add_get("/api/groups/{group}", reader(lambda b, q: b.group(q.match_info["group"])))
    r.add_post("/api/groups/{group}/reset-offsets", writer(
        lambda b, q, body: b.reset_group_offsets(q.match_info["group"], str(body.get("topic", "")),
                                                 str(body.get("to", "")), query_int(body.get("value"), "value"))))
    r.add_get("/api/schemas", reader(lambda b, q: schemas.subjects(console.server)))
    r.add_get("/api/schemas/{subject}", reader(lambda b, q: schemas.subject(console.server, q.match_info["subject"])))
    r.add_get("/api/schemas/{subject}/diff", reader(lambda b, q: schemas.diff(
        console.server, q.match_info["subject"], query_int(q.query.get("from"), "from"),
        query_int(q.query.get("to"), "to"))))
    r.add_static("/static", STATIC)
    add_page_routes(app, console)
    r.add_get("/api/{tail:.*}", extra_json)
    return app


def _configs(body: dict[str, Any]) -> dict[str, Any]:
    configs = body.get("configs")
    if isinstance(configs, dict):
        return {str(k): None if v is None else str(v) for k, v in configs.items()}
    if "name" in body:  # a form: name=...&value=... (an empty value deletes the override)
        value = body.get("value")
        return {str(body["name"]): None if value in (None, "") else str(value)}
    raise ConsoleError(400, 'expected {"configs": {"name": "value" or null}}')


def _create_topic(backend: Backend, request: web.Request, body: dict[str, Any]) -> Any:
    name = str(body.get("name") or "").strip()
    if not name:
        raise ConsoleError(400, "a topic needs a name")
    configs = body.get("configs") or {}
    if isinstance(configs, str):  # a form's "k=v" lines
        configs = dict(line.split("=", 1) for line in configs.splitlines() if "=" in line)
    partitions = query_int(body.get("partitions"), "partitions") or 1
    return backend.create_topic(name, partitions, {str(k).strip(): str(v).strip() for k, v in configs.items()})


def _produce(backend: Backend, request: web.Request, body: dict[str, Any]) -> Any:
    headers = body.get("headers") or []
    if isinstance(headers, dict):
        headers = list(headers.items())
    elif isinstance(headers, str):  # a form's "k=v" lines
        headers = [tuple(line.split("=", 1)) for line in headers.splitlines() if "=" in line]
    key = body.get("key")
    return backend.produce(request.match_info["topic"], query_int(body.get("partition"), "partition"),
                           None if key in (None, "") else str(key),
                           None if body.get("value") is None else str(body["value"]),
                           [(str(k), str(v)) for k, v in headers])


def _records(backend: Backend, request: web.Request) -> Any:
    return backend.records(request.match_info["topic"], **record_query(request))


def _local(path: str) -> str:
    """A redirect target on this site only (never //elsewhere or a scheme)."""
    return path if path.startswith("/") and not path.startswith("//") else "/"


class ConsoleHttp:
    """The aiohttp site on its own thread and loop; `shutdown()`/`server_close()` as the WSGI server had."""

    def __init__(self, server: Server, host: str, port: int) -> None:
        self.console = Console(server)
        self.loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self.port = 0
        started: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(host, port, started), name="tidelog-console",
                                        daemon=True)
        self._thread.start()
        self.port = started.result(timeout=60)

    def _main(self, host: str, port: int, started: concurrent.futures.Future[int]) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.port = self.loop.run_until_complete(self._start(host, port))
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            started.set_exception(exc)
            return
        started.set_result(self.port)
        self.loop.run_forever()
        self.loop.run_until_complete(self._stop())
        self.loop.close()

    async def _start(self, host: str, port: int) -> int:
        self._runner = web.AppRunner(build_app(self.console), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def shutdown(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
        self.console.close()

    def server_close(self) -> None:
        pass  # shutdown() closed the socket


def serve_console(server: Server, host: str, port: int) -> ConsoleHttp:
    return ConsoleHttp(server, host, port)
