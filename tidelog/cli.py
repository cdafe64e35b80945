"""`tidelog` console script.

    tidelog serve [--config server.properties] [--override name=value ...] [--port N] [--log-dirs DIRS]
                  [--metrics-port N] [--schema-registry-port N] [--log-format console|json] [--log-level INFO]

Settings use Kafka's names. Precedence, lowest first: built-in defaults (listeners PLAINTEXT://localhost:9092,
log.dirs ./data, node.id 1), the properties file, environment variables (TIDELOG_ + the name upper-cased with
dots as underscores, e.g. TIDELOG_LOG_DIRS), convenience flags, then --override. Metrics are off unless
metrics.port is set (--metrics-port 9308 is a good choice; 0 picks a free port). The Schema Registry (Confluent's
REST API, schemas on the `_schemas` topic) is off unless schema.registry.port is set (--schema-registry-port 8081).

    tidelog cleaner status [--url URL]          # every compacted partition's cleaning state (GET /api/cleaner)
    tidelog cleaner explain TOPIC [--url URL]  # one sentence per partition: what holds compaction back

`tidelog dump-log` is provided by the log-cleaner package (storage/dump_log.py) when present.

    tidelog topic|produce|consume|group|cluster|acl|user ...  # Kafka-protocol client commands (tidelog/commands/)
    tidelog schema list|get|register|check|delete [--url URL]  # the Schema Registry's REST API
"""

from __future__ import annotations

import argparse
import gc
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from tidelog.commands import COMMANDS, run_command
from tidelog.config.broker_config import BrokerConfig, parse_listeners
from tidelog.config.definitions import ConfigError


def _parse_override(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name.strip(), value.strip()


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter as wide as the terminal, found as shutil.get_terminal_size() does without importing
    shutil: argparse builds a formatter for every add_argument, and shutil pulls in bz2 and lzma (~2 ms of
    start-up)."""
    try:
        width = int(os.environ.get("COLUMNS", "0"))
        if width <= 0 and sys.__stdout__ is not None:
            width = os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (ValueError, OSError):  # not a terminal
        width = 0
    return argparse.HelpFormatter(prog, width=(width if width > 0 else 80) - 2)


def build_parser(client_commands: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidelog", description="A single-node Kafka-protocol broker.",
                                     formatter_class=_help_formatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker", formatter_class=_help_formatter)
    serve.add_argument("--config", metavar="FILE", help="server.properties-style file (Kafka config names)")
    serve.add_argument("--override", metavar="NAME=VALUE", action="append", default=[], type=_parse_override,
                       help="set a config (highest precedence); repeatable")
    serve.add_argument("--port", type=int, help="shortcut for listeners=PLAINTEXT://<host>:PORT")
    serve.add_argument("--host", help="listener host (with --port; default localhost)")
    serve.add_argument("--log-dirs", help="shortcut for log.dirs")
    serve.add_argument("--node-id", type=int, help="shortcut for node.id")
    serve.add_argument("--metrics-port", type=int,
                       help="Prometheus metrics HTTP port (-1 = off, the default; 0 = any free port)")
    serve.add_argument("--schema-registry-port", type=int, metavar="PORT",
                       help="Confluent-compatible Schema Registry HTTP port (-1 = off, the default; 0 = any free port)")
    serve.add_argument("--fault-control-port", type=int, metavar="PORT",
                       help="tests only: script faults over a JSON-lines channel on 127.0.0.1:PORT "
                            "(tidelog.testing.BrokerProcess; see tidelog/broker/fault_control.py)")
    serve.add_argument("--log-format", choices=("console", "json"), default="console")
    serve.add_argument("--log-level", default="INFO")
    # Test-only: exit abruptly at a named storage/cleaner step (tidelog.storage.fault_hooks.FaultPoint).
    serve.add_argument("--crash-at", metavar="STEP", help=argparse.SUPPRESS)
    cleaner = sub.add_parser("cleaner", help="why compacted partitions are (not) being cleaned: status | explain TOPIC",
                             add_help=False, formatter_class=_help_formatter)  # parsed by tidelog.cleaner.status_cli
    cleaner.add_argument("args", nargs=argparse.REMAINDER)
    dump = sub.add_parser("dump-log", help="print the batches/records of log segments (kafka-dump-log style)",
                          add_help=False, formatter_class=_help_formatter)
    dump.add_argument("args", nargs=argparse.REMAINDER)

    # listed in `tidelog --help`; `tidelog serve` skips them (~0.1 ms a subparser of its start-up)
    for name, (_module, summary) in COMMANDS.items() if client_commands else ():
        sub.add_parser(name, help=summary, add_help=False, formatter_class=_help_formatter).add_argument(
            "args", nargs=argparse.REMAINDER)
    return parser


def serve_overrides(args: argparse.Namespace) -> dict[str, str]:
    overrides: dict[str, str] = {}
    if args.port is not None:
        overrides["listeners"] = f"PLAINTEXT://{args.host or 'localhost'}:{args.port}"
    if args.log_dirs is not None:
        overrides["log.dirs"] = args.log_dirs
    if args.node_id is not None:
        overrides["node.id"] = str(args.node_id)
    if args.metrics_port is not None:
        overrides["metrics.port"] = str(args.metrics_port)
    if args.schema_registry_port is not None:
        overrides["schema.registry.port"] = str(args.schema_registry_port)
    overrides.update(dict(args.override))
    return overrides


def bind_listener(listeners: str) -> socket.socket:
    """Bind and listen on the first listener right away: the port accepts connections (queued in the
    backlog) while the logs load; requests are read once the broker has started."""
    _name, host, port = parse_listeners(listeners)[0]
    if not host and socket.has_dualstack_ipv6():
        return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=512)
    return socket.create_server((host or "0.0.0.0", port), backlog=512)


def run_serve(args: argparse.Namespace) -> int:
    # No cyclic collection while starting: start-up allocates mostly long-lived objects (modules, classes, config,
    # loaded logs) and makes little cyclic garbage, yet the collector would walk them again and again (~5 ms of
    # the first Metadata answer). Re-enabled below, once the broker is started, after gc.freeze().
    gc.disable()

    try:
        config = BrokerConfig.load(args.config, os.environ, serve_overrides(args))
    except ConfigError as exc:
        print(f"tidelog: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        sock = bind_listener(config.listeners)
    except OSError as exc:
        print(f"tidelog: cannot listen on {config.listeners}: {exc}", file=sys.stderr)
        return 1
    # Everything below is imported after the socket is listening (lazy for start-up time); Server.start answers ApiVersions before
    # it loads storage, groups and cleaner (on a worker thread); structlog loads with the first log line.
    from tidelog.logging import configure_logging, release_held_logs

    # start-up's log lines are written once the broker has started (formatting them imports structlog)
    configure_logging(args.log_format, args.log_level, hold=True)
    import logging

    log = logging.getLogger("tidelog")
    import asyncio
    import signal

    from tidelog.broker.server import Server
    from tidelog.metadata import StateFileError
    from tidelog.storage.log_manager import InconsistentClusterIdError, LogDirLockedError

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        faults = control = None
        if args.fault_control_port is not None or args.crash_at:  # tests only: lazy for start-up time
            from tidelog.broker.faults import FaultInjector
            from tidelog.storage.fault_hooks import ExitAt

            faults = FaultInjector(ExitAt(args.crash_at) if args.crash_at else None)
        server = Server(config, faults=faults)
        try:
            # ready once the logs are loaded; the coordinators load right after (COORDINATOR_LOAD_IN_PROGRESS)
            await server.start(sock=sock, load_services_after_ready=True)
            await server.wait_services_loaded()  # the ready line and the fault channel mean fully started
            release_held_logs()
            # lazy for start-up time: imported once the broker is ready
            from tidelog.accelerators import log_status
            from tidelog.logging import get_logger

            log_status(get_logger("tidelog.accelerators"))  # which C accelerators run, or that none does
            from tidelog.broker.malloc_tuning import tune_malloc

            tune_malloc()  # large request and fetch buffers reused from the heap, not mapped afresh each time
            # What start-up built (modules, schema classes, config) lives as long as the process: the cyclic GC
            # need not walk it again on every older-generation collection (gen-1 pauses halve under load). The few
            # hundred cyclic garbage objects start-up left behind are frozen with it (collecting them first would
            # stall the loop ~10 ms).
            gc.freeze()
            gc.enable()
            if faults is not None and args.fault_control_port is not None:  # tests only: lazy, as above
                from tidelog.broker.fault_control import FaultControlChannel

                control = FaultControlChannel(server, faults)
                await control.start(args.fault_control_port)
            state = server.broker
            others = "".join(
                f", {name} port {port} (advertised {':'.join(map(str, state.advertised_endpoint(name)))})"
                for name, port in list(server.ports.items())[1:])
            print(f"tidelog ready: listening on {server.host}:{server.port} "
                  f"(advertised {state.advertised_host}:{state.advertised_port}{others}, node.id {state.node_id}, "
                  f"cluster.id {state.cluster_id}, log.dirs {','.join(config.log_dirs)})", flush=True)
            await stop.wait()
            log.info("Shutting down")
        finally:
            release_held_logs()
            if control is not None:
                await control.stop()
            await server.stop()
        log.info("Shut down cleanly")

    try:
        import uvloop  # lazy for start-up time: after the socket is listening

        uvloop.run(main())
    except KeyboardInterrupt:
        pass
    except (StateFileError, LogDirLockedError, InconsistentClusterIdError) as exc:
        # a damaged or too new metadata file (tidelog.metadata.store), a log dir another process holds, or log
        # dirs of two clusters: one line, as Kafka stops with the exception's message
        print(f"tidelog: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:  # found while the listeners are built, e.g. a keystore OpenSSL cannot load
        print(f"tidelog: configuration error: {exc}", file=sys.stderr)
        return 2
    return 0


def run_dump_log(rest: Sequence[str]) -> int:
    try:  # lazy for start-up time: only `tidelog dump-log` needs it
        from tidelog.storage import dump_log
    except ModuleNotFoundError as exc:
        if exc.name != "tidelog.storage.dump_log":
            raise
        print("tidelog dump-log is not available in this build", file=sys.stderr)
        return 2
    main: Any = dump_log.main
    return int(main(list(rest)) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "dump-log":
        return run_dump_log(argv[1:])
    if argv and argv[0] == "cleaner":  # lazy for start-up time: only `tidelog cleaner` needs it
        from tidelog.cleaner import status_cli

        return status_cli.main(argv[1:])

    if argv and argv[0] in COMMANDS:
        return run_command(argv)
    args = build_parser(client_commands=argv[:1] != ["serve"]).parse_args(argv)
    if args.command == "serve":
        return run_serve(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
