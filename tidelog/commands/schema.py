"""`tidelog schema list|get|register|check|delete`: the Schema Registry's REST API (Confluent's paths, which
tidelog's registry serves on `schema.registry.port`) over HTTP with the standard library, as `tidelog cleaner`
reads the metrics port. A registry error is printed as one line with Confluent's `error_code` (e.g. 40401)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tidelog.commands.common import CommandError, emit, key_values, table
from tidelog.config.broker_config import BrokerConfig
from tidelog.config.definitions import ConfigError

DEFAULT_REGISTRY_PORT = 8081  # Confluent's port, the README's suggested schema.registry.port
URL_ENV = "TIDELOG_SCHEMA_REGISTRY_URL"
USER_ENV = "TIDELOG_SCHEMA_REGISTRY_USER_INFO"  # NAME:PASSWORD, as Confluent's basic.auth.user.info
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def configure(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("registry and output")
    group.add_argument("--url", help=f"the registry's address (default ${URL_ENV}, else http://schema.registry.host:"
                                     "schema.registry.port from --config and TIDELOG_* variables, port "
                                     f"{DEFAULT_REGISTRY_PORT} when schema.registry.port is unset)")
    group.add_argument("--config", metavar="FILE", help="the broker's server.properties, for the default --url")
    group.add_argument("-u", "--user", metavar="NAME:PASSWORD",
                       help="HTTP Basic credentials (a SASL user of the broker; needed for writes when it has SASL); "
                            f"default ${USER_ENV}, which keeps the password out of the process list")
    group.add_argument("--format", choices=("text", "json"), default="text",
                       help="text tables for people (default) or JSON for scripts")
    group.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                       help="how long to wait for the registry (default 30)")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = sub.add_parser("list", parents=[common], help="subjects with their latest version, type, compatibility")
    listing.add_argument("--prefix", default="", help="only subjects starting with this")
    listing.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    listing.set_defaults(func=list_subjects)

    get = sub.add_parser("get", parents=[common], help="a subject's version (default the latest), or a schema by id")
    get.add_argument("subject", nargs="?", metavar="SUBJECT")
    get.add_argument("-v", "--version", default="latest", help="a version number or latest (default)")
    get.add_argument("--id", type=int, help="the schema with this global id (no SUBJECT)")
    get.set_defaults(func=get_schema)

    register = sub.add_parser("register", parents=[common], help="register a schema under a subject")
    _schema_arguments(register)
    register.add_argument("--normalize", action="store_true", help="register the normalized schema")
    register.set_defaults(func=register_schema)

    check = sub.add_parser("check", parents=[common],
                           help="is a schema compatible with a subject's version (exit code 1 when not)?")
    _schema_arguments(check)
    check.add_argument("-v", "--version", default="latest", help="the version to check against (default latest)")
    check.set_defaults(func=check_schema)

    delete = sub.add_parser("delete", parents=[common], help="delete a subject or one version (soft unless --permanent)")
    delete.add_argument("subject", metavar="SUBJECT")
    delete.add_argument("-v", "--version", help="one version (a number or latest); default the whole subject")
    delete.add_argument("--permanent", action="store_true", help="hard delete (after a soft delete)")
    delete.set_defaults(func=delete_schema)


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("subject", metavar="SUBJECT")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("-s", "--schema", metavar="TEXT", help="the schema text")
    source.add_argument("-f", "--file", metavar="PATH", help="read the schema from this file (- for stdin)")
    parser.add_argument("-t", "--type", type=str.upper, choices=SCHEMA_TYPES, default="AVRO",
                        help="the schema type (default AVRO)")
    parser.add_argument("-r", "--reference", metavar="NAME=SUBJECT:VERSION", action="append", default=[],
                        type=_reference, help="a schema reference; repeatable")


def _reference(text: str) -> dict[str, Any]:
    name, sep, target = text.partition("=")
    subject, colon, version = target.rpartition(":")
    if not sep or not colon or not name or not subject or not version.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=SUBJECT:VERSION, got {text!r}")
    return {"name": name, "subject": subject, "version": int(version)}


# ---------------------------------------------------------------------------------------------------- HTTP

def default_url(config_file: str | None) -> str:
    """$TIDELOG_SCHEMA_REGISTRY_URL, else the local broker's registry address from its config."""
    if os.environ.get(URL_ENV):
        return os.environ[URL_ENV]
    try:
        config = BrokerConfig.load(config_file, os.environ, {})
    except ConfigError as exc:
        raise CommandError(f"configuration error: {exc}") from None
    port = int(config.get("schema.registry.port"))
    host = str(config.get("schema.registry.host"))
    host = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    return f"http://{f'[{host}]' if ':' in host else host}:{port if port > 0 else DEFAULT_REGISTRY_PORT}"


def _without_credentials(url: str) -> str:
    """`url` with any user:password@ taken out (an error line must not show a password)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class Registry:
    """Confluent's REST API at `url`; a registry error raises CommandError with its message and error_code."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.url = (args.url or default_url(args.config)).rstrip("/")
        self.timeout = float(args.timeout)
        self.headers = {"Accept": CONTENT_TYPE}
        user = args.user or os.environ.get(USER_ENV)
        if user:
            if ":" not in user:
                raise CommandError(f"--user / ${USER_ENV}: expected NAME:PASSWORD")
            self.headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items() if v not in (None, "")}
        url = self.url + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers, **({"Content-Type": CONTENT_TYPE} if data is not None else {}))
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            raise CommandError(_error_line(e)) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise CommandError(f"cannot reach the schema registry at {_without_credentials(self.url)}: {reason}") \
                from None
        except ValueError as e:
            raise CommandError(f"{url}: the answer is not JSON ({e})") from None


def _error_line(e: urllib.error.HTTPError) -> str:
    """Confluent's {"error_code", "message"} as one line; another body as the HTTP status."""
    try:
        body = json.loads(e.read() or b"null")
    except ValueError:
        body = None
    if isinstance(body, dict) and "error_code" in body:
        message = " ".join(str(body.get("message") or e.reason).splitlines())
        return f"{message} (error code {body['error_code']})"
    return f"HTTP {e.code} {e.reason}"


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _pretty(schema_type: str, text: str) -> str:
    """AVRO and JSON schemas indented; a Protobuf schema's text as it is."""
    if schema_type == "PROTOBUF":
        return text
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text


def _read_schema(args: argparse.Namespace) -> dict[str, Any]:
    if args.file is not None:
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
        except OSError as e:
            raise CommandError(f"cannot read {args.file}: {e.strerror or e}") from None
    else:
        text = args.schema
    body: dict[str, Any] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    if args.reference:
        body["references"] = args.reference
    return body


# ---------------------------------------------------------------------------------------------------- actions

def list_subjects(args: argparse.Namespace, _client: Any) -> int:
    registry = Registry(args)
    rows = []
    for subject in registry.call("GET", "/subjects", deleted=args.deleted, subjectPrefix=args.prefix):
        path = f"/subjects/{_quote(subject)}"
        versions = registry.call("GET", path + "/versions", deleted=args.deleted)
        latest = registry.call("GET", f"{path}/versions/{versions[-1]}", deleted=args.deleted)
        config = registry.call("GET", f"/config/{_quote(subject)}", defaultToGlobal=True)
        rows.append({"subject": subject, "latest_version": latest["version"], "id": latest["id"],
                     "schema_type": latest.get("schemaType", "AVRO"), "versions": versions,
                     "compatibility": config.get("compatibilityLevel")})
    emit(args, rows, lambda: table(["subject", "version", "id", "type", "compatibility", "versions"],
                                   [(r["subject"], r["latest_version"], r["id"], r["schema_type"],
                                     r["compatibility"], len(r["versions"])) for r in rows]))
    return 0


def get_schema(args: argparse.Namespace, _client: Any) -> int:
    registry = Registry(args)
    if args.id is not None:
        if args.subject:
            raise CommandError("give SUBJECT or --id, not both")
        found = registry.call("GET", f"/schemas/ids/{args.id}")
        found["id"] = args.id
        found["subjects"] = registry.call("GET", f"/schemas/ids/{args.id}/versions")
    elif args.subject:
        found = registry.call("GET", f"/subjects/{_quote(args.subject)}/versions/{_quote(args.version)}")
    else:
        raise CommandError("give a SUBJECT (and --version) or --id")
    found.setdefault("schemaType", "AVRO")
    fields = [("subject", found.get("subject")), ("version", found.get("version")), ("id", found["id"]),
              ("type", found["schemaType"])]
    if "subjects" in found:
        fields = [("id", found["id"]), ("type", found["schemaType"]),
                  ("used by", ", ".join(f"{v['subject']} v{v['version']}" for v in found["subjects"]))]
    fields += [("reference", f"{r['name']} = {r['subject']} v{r['version']}") for r in found.get("references", [])]
    emit(args, found, lambda: key_values(fields) + "\n\n" + _pretty(found["schemaType"], found["schema"]))
    return 0


def register_schema(args: argparse.Namespace, _client: Any) -> int:
    registry = Registry(args)
    body = _read_schema(args)
    path = f"/subjects/{_quote(args.subject)}"
    registered = registry.call("POST", path + "/versions", body, normalize=args.normalize)
    # the registration answers the id; the lookup finds the version it has under this subject
    found = registry.call("POST", path, body, normalize=args.normalize)
    result = {"subject": args.subject, "id": registered["id"], "version": found.get("version")}
    emit(args, result, lambda: table(["subject", "version", "id"], [(args.subject, result["version"], result["id"])]))
    return 0


def check_schema(args: argparse.Namespace, _client: Any) -> int:
    registry = Registry(args)
    answer = registry.call("POST", f"/compatibility/subjects/{_quote(args.subject)}/versions/{_quote(args.version)}",
                           _read_schema(args), verbose=True)
    compatible = bool(answer.get("is_compatible"))
    result = {"subject": args.subject, "version": args.version, "is_compatible": compatible,
              "messages": answer.get("messages") or []}
    emit(args, result, lambda: "\n".join(["COMPATIBLE" if compatible else "INCOMPATIBLE", *result["messages"]]))
    return 0 if compatible else 1


def delete_schema(args: argparse.Namespace, _client: Any) -> int:
    registry = Registry(args)
    path = f"/subjects/{_quote(args.subject)}"
    if args.version is not None:
        versions = [registry.call("DELETE", f"{path}/versions/{_quote(args.version)}", permanent=args.permanent)]
    else:
        versions = registry.call("DELETE", path, permanent=args.permanent)
    result = {"subject": args.subject, "deleted_versions": versions, "permanent": args.permanent}
    emit(args, result, lambda: table(["subject", "deleted versions", "how"],
                                     [(args.subject, ",".join(map(str, versions)),
                                       "permanently" if args.permanent else "soft")]))
    return 0
