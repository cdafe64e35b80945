"""What every `tidelog <command>` shares: the bootstrap and client options, one kafka-python client per kind,
the output (text tables or `--format json`), the progress indicator and one-line errors.

A command module defines `configure(parser)` (its arguments and subcommands, each with `func=`) and functions
`func(args, client) -> int | None`; `run_command` parses, runs and turns failures into one line on stderr and
exit code 1: an unreachable bootstrap address, a Kafka error (named by its error code name), a bad argument.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from tidelog.commands import COMMANDS

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "TIDELOG_BOOTSTRAP"
CONNECT_TIMEOUT_S = 5.0


class CommandError(Exception):
    """A failure the user can act on, printed as one line; exit code 1."""


# ---------------------------------------------------------------------------------------------------- arguments

def client_options() -> argparse.ArgumentParser:
    """The options every command takes, as a parent parser for each leaf command."""
    parent = argparse.ArgumentParser(add_help=False)
    add_client_options(parent)
    return parent


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """Add the options every command takes to a leaf command's parser."""
    group = parser.add_argument_group("connection and output")
    group.add_argument("-b", "--bootstrap-server", metavar="HOST:PORT[,...]",
                       default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                       help=f"brokers to bootstrap from (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    group.add_argument("-X", dest="client_config", metavar="NAME=VALUE", action="append", default=[],
                       type=name_value, help="a Kafka client config, e.g. security.protocol=SASL_SSL, "
                       "sasl.mechanism=SCRAM-SHA-512, sasl.username=, sasl.password=, ssl.ca.location=; repeatable")
    group.add_argument("--format", choices=("text", "json"), default="text",
                       help="text tables for people (default) or JSON for scripts")
    group.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                       help="how long to wait for the cluster to answer (default 30)")


def name_value(text: str) -> tuple[str, str]:
    """argparse type for `name=value` arguments (configs, headers, -X)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name.strip(), value


def run_command(name: str, argv: list[str]) -> int:
    module = importlib.import_module(f"tidelog.commands.{COMMANDS[name][0]}")
    parser = argparse.ArgumentParser(prog=f"tidelog {name}", description=COMMANDS[name][1])
    module.configure(parser)
    args = parser.parse_args(argv)
    client = Client(args)
    name = f"{name} {args.action}" if getattr(args, "action", None) else name
    try:
        return int(args.func(args, client) or 0)
    except CommandError as exc:
        return fail(name, str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tidelog consume ... | head`: the reader has gone; so has our stdout
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        kafka_line = describe_kafka_error(exc)
        if kafka_line is None:
            raise
        return fail(name, kafka_line)
    finally:
        client.close()


def fail(name: str, message: str) -> int:
    print(f"tidelog {name}: {message}", file=sys.stderr)
    return 1


def describe_kafka_error(exc: BaseException) -> str | None:
    """One line for a kafka-python error: a broker error by its Kafka error code name; None if not Kafka's."""
    errors = sys.modules.get("kafka.errors")
    if errors is None or not isinstance(exc, errors.KafkaError):
        return None
    if isinstance(exc, errors.BrokerResponseError) and exc.message:
        detail = " ".join(str(a) for a in exc.args if a) or exc.description or ""
        detail = re.sub(r"^\w+Error: ", "", detail)  # kafka-python repeats the class name in some messages
        return f"{exc.message} (error code {exc.errno}){': ' + detail if detail else ''}"
    if isinstance(exc, errors.KafkaTimeoutError):
        return f"timed out: {exc.args[0] if exc.args else 'no answer from the cluster'}"
    return f"{type(exc).__name__}: {' '.join(str(a) for a in exc.args) or 'failed'}"


def error_name(code: int) -> str:
    """Kafka's name of an error code ("NONE" for 0), e.g. TOPIC_ALREADY_EXISTS."""
    import kafka.errors as errors

    if code == 0:
        return "NONE"
    return str(errors.for_code(code).message or f"UNKNOWN_ERROR_{code}")


def parse_error_text(text: str) -> tuple[str, str | None]:
    """kafka-python's text for a broker error ('[Error 40] InvalidConfigurationException: ...', as its admin
    client reports AlterConfigs and DescribeGroups outcomes) as (Kafka's error code name, message)."""
    found = re.match(r"\[Error (-?\d+)\] [^:]*:? ?(.*)", text)
    if not found:
        return "UNKNOWN_SERVER_ERROR", text
    return error_name(int(found.group(1))), found.group(2) or None


# ---------------------------------------------------------------------------------------------------- clients

# Kafka client config names (Java and librdkafka spellings) -> kafka-python's keyword arguments.
_CONFIG_NAMES = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.password": "ssl_password",
    "client.id": "client_id",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
}
_PEM_ONLY = ("ssl.truststore.type", "ssl.keystore.type")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS_FIELD = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def kafka_python_config(pairs: Sequence[tuple[str, str]], known: Mapping[str, Any]) -> dict[str, Any]:
    """`-X name=value` pairs as kafka-python keyword arguments; `known` is a client's DEFAULT_CONFIG (names not
    listed above are taken dots-to-underscores when that client has them, with its default's type)."""
    config: dict[str, Any] = {}
    for name, value in pairs:
        if name in _PEM_ONLY:
            if value.upper() != "PEM":
                raise CommandError(f"-X {name}={value}: only PEM files are supported")
            continue
        if name == "sasl.jaas.config":  # PlainLoginModule / ScramLoginModule required username="" password="";
            for field, found in _JAAS_FIELD.findall(value):
                config[f"sasl_plain_{field}"] = found.replace('\\"', '"').replace("\\\\", "\\")
            continue
        if name == "ssl.endpoint.identification.algorithm":
            config["ssl_check_hostname"] = value.strip().lower() == "https"
            continue
        key = _CONFIG_NAMES.get(name) or name.replace(".", "_")
        if key not in known and key not in _CONFIG_NAMES.values():
            raise CommandError(f"-X {name}: not a client config kafka-python knows")
        if key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") and not os.path.isfile(value):
            raise CommandError(f"-X {name}={value}: no such file")
        config[key] = _typed(name, value, known.get(key))
    if config.get("security_protocol"):
        config["security_protocol"] = str(config["security_protocol"]).upper()
        if config["security_protocol"] not in SECURITY_PROTOCOLS:
            raise CommandError(f"-X security.protocol={config['security_protocol']}: one of "
                               f"{', '.join(SECURITY_PROTOCOLS)}")
    if config.get("sasl_mechanism"):
        config["sasl_mechanism"] = str(config["sasl_mechanism"]).upper()
    return config


def _typed(name: str, value: str, default: Any) -> Any:
    if isinstance(default, bool):
        return value.strip().lower() in ("true", "1", "yes")
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            raise CommandError(f"-X {name}={value}: expected an integer") from None
    if isinstance(default, float):
        return float(value)
    return value


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """host:port pairs of a bootstrap list (`[::1]:9092` for IPv6; the port defaults to 9092)."""
    addresses = []
    for item in (part.strip() for part in bootstrap.split(",")):
        if not item:
            continue
        if "://" in item:  # PLAINTEXT://host:port, as listeners are written
            item = item.split("://", 1)[1]
        host, port_text = item, "9092"
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest.lstrip(":") or "9092"
        elif item.count(":") == 1:
            host, port_text = item.split(":")
        try:
            port = int(port_text)
        except ValueError:
            raise CommandError(f"bad bootstrap address {item!r}: the port is not a number") from None
        addresses.append((host or "localhost", port))
    if not addresses:
        raise CommandError("no bootstrap address given (-b HOST:PORT)")
    return addresses


def check_reachable(bootstrap: str, timeout: float) -> None:
    """Fail in one line, fast, when no bootstrap address accepts a TCP connection (kafka-python itself would
    retry until its bootstrap timeout and then say only that it could not bootstrap)."""
    reasons = []
    for host, port in bootstrap_addresses(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except socket.gaierror as exc:
            reasons.append(f"{host}: unknown host ({exc.strerror})")
        except TimeoutError:
            reasons.append(f"{host}:{port}: no answer within {timeout:g} s")
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise CommandError(f"cannot connect to a broker at {bootstrap} ({'; '.join(reasons)})")


class _LoginRefused(Exception):
    pass


class _LoginRefusals(logging.Handler):
    """kafka-python logs a refused SASL login (wrong password, mechanism not enabled) and retries it until its
    bootstrap timeout; a command gives up at the first. Raised from the log call, which kafka-python makes on
    the thread that is bootstrapping, the exception ends the bootstrap and reaches the client's constructor."""

    REFUSALS = ("SaslAuthenticationFailedError", "UnsupportedSaslMechanismError", "IllegalSaslStateError")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name != "kafka.net.manager":  # its bootstrap loop: what is raised here ends the bootstrap
            return
        for arg in record.args if isinstance(record.args, tuple) else ():
            if isinstance(arg, Exception) and type(arg).__name__ in self.REFUSALS:
                raise _LoginRefused(describe_kafka_error(arg) or str(arg))


class Client:
    """The command's kafka-python clients, made on first use with the bootstrap and `-X` options."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.bootstrap: str = getattr(args, "bootstrap_server", DEFAULT_BOOTSTRAP)
        self.pairs: list[tuple[str, str]] = list(getattr(args, "client_config", []))
        self.timeout: float = float(getattr(args, "timeout", 30.0))
        self._admin: Any = None
        self._closables: list[Any] = []
        self._reachable = False

    def _config(self, cls: Any, **extra: Any) -> dict[str, Any]:
        if not self._reachable:
            check_reachable(self.bootstrap, min(self.timeout, CONNECT_TIMEOUT_S))
            self._reachable = True
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap.split(","), "client_id": "tidelog-cli"}
        if "bootstrap_timeout_ms" in cls.DEFAULT_CONFIG:
            config["bootstrap_timeout_ms"] = int(self.timeout * 1000)
        if "request_timeout_ms" in cls.DEFAULT_CONFIG:
            config["request_timeout_ms"] = int(self.timeout * 1000)
        config.update(kafka_python_config(self.pairs, cls.DEFAULT_CONFIG))
        config.update(extra)
        return {k: v for k, v in config.items() if k in cls.DEFAULT_CONFIG}

    def _open(self, cls: Any, **extra: Any) -> Any:
        import kafka.errors as errors

        config = self._config(cls, **extra)
        watch = _LoginRefusals()
        kafka_log = logging.getLogger("kafka")
        kafka_log.addHandler(watch)
        with progress(f"connecting to {self.bootstrap}"):
            try:
                client = cls(**config)
            except _LoginRefused as exc:
                raise CommandError(f"{self.bootstrap} refused the login: {exc}") from None
            except (errors.KafkaConnectionError, errors.KafkaTimeoutError):
                raise CommandError(f"no Kafka answer from {self.bootstrap} within {self.timeout:g} s: the port "
                                   "accepts connections but the handshake failed (does -X security.protocol "
                                   "match the listener?)") from None
            finally:
                kafka_log.removeHandler(watch)
        self._closables.append(client)
        return client

    def admin(self) -> Any:
        if self._admin is None:
            from kafka import KafkaAdminClient

            self._admin = self._open(KafkaAdminClient)
        return self._admin

    def producer(self, **extra: Any) -> Any:
        from kafka import KafkaProducer

        return self._open(KafkaProducer, **extra)

    def consumer(self, **extra: Any) -> Any:
        from kafka import KafkaConsumer

        return self._open(KafkaConsumer, **extra)

    def close(self) -> None:
        for client in reversed(self._closables):
            with contextlib.suppress(Exception, KeyboardInterrupt):
                client.close()
        self._closables.clear()


# ---------------------------------------------------------------------------------------------------- output

def emit(args: argparse.Namespace, data: Any, text: Callable[[], str] | str) -> None:
    """Print `data` as JSON with --format json, else the text (a table) that `text` renders."""
    if args.format == "json":
        print(json.dumps(data, indent=2, default=_json_default))
    else:
        rendered = text() if callable(text) else text
        if rendered:
            print(rendered)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "name"):  # enums
        return value.name
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Columns aligned, headers upper-cased, as rpk prints them; None shows as '-'."""
    cells = [[h.upper() for h in headers]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    """`name  value` lines (a two-column table without headers)."""
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {'-' if v is None else v}".rstrip() for k, v in pairs)


@contextlib.contextmanager
def progress(message: str, delay: float = 0.3) -> Iterator[Spinner]:
    """A spinner on stderr while a command waits, only when stderr is a terminal and the wait lasts `delay`."""
    spinner = Spinner(message, delay)
    spinner.start()
    try:
        yield spinner
    finally:
        spinner.stop()


class Spinner:
    FRAMES = "|/-\\"

    def __init__(self, message: str, delay: float) -> None:
        self.message = message
        self.delay = delay
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._shown = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if sys.stderr is not None and sys.stderr.isatty():
            self._thread = threading.Thread(target=self._spin, name="tidelog-progress", daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        frame = 0
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            with self._lock:
                sys.stderr.write(f"\r{self.FRAMES[frame % 4]} {self.message}")
                sys.stderr.flush()
                self._shown = True
            frame += 1
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
                self._shown = False


# ---------------------------------------------------------------------------------------------------- times

def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO-8601 date-time (no zone = local time, as
    kafka-consumer-groups --to-datetime reads it)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"bad time {text!r}: expected milliseconds since the epoch or an ISO-8601 "
                           "date-time such as 2026-11-28T09:30:00Z") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def format_time_ms(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
