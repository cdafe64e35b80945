"""Start-up's import budget (issue "produce path": first Metadata answered within 0.10 s, bench/startup.py): a broker
started as `tidelog serve` starts it (coordinators loaded after `ready`) answers ApiVersions and its first Metadata
requests without importing what only other features use. Each module listed here was measured on that path (python
-X importtime) and moved off it; a change that pulls one back fails here instead of slowly eroding start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tidelog.testing import run_broker

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import asyncio, socket, struct, sys, threading
import tidelog.cli  # the console script's own imports
from tidelog.broker.faults import FaultInjector  # as `tidelog serve --crash-at` passes one
from tidelog.broker.server import Server
from tidelog.config.broker_config import BrokerConfig
from tidelog.logging import configure_logging, release_held_logs

NOT_ON_THE_PATH = (
    "tidelog.security.acl_store", "tidelog.security.principal", "tidelog.security.ssl_context",
    "tidelog.security.tls", "tidelog.security.sasl", "tidelog.security.authenticator", "tidelog.security.scram_store",
    "tidelog.security.jaas", "tidelog.config.config_entries",
    "tidelog.protocol.otlp", "tidelog.protocol.crc", "tidelog.cleaner", "tidelog.coordinator", "tidelog.storage.log",
    "tidelog.broker.fetch_session", "tidelog.broker.client_metrics", "shutil",
    "datetime", "cryptography", "structlog", "prometheus_client", "kafka", "lz4", "zstandard", "cramjam",
    "snappy", "crc32c", "zipfile", "tidelog.console", "aiohttp", "jinja2",
    # the client commands (tidelog topic|produce|...): imported only when one runs
    "tidelog.commands.common", "tidelog.commands.topic", "tidelog.commands.produce", "tidelog.commands.consume",
    "tidelog.commands.group", "tidelog.commands.cluster", "tidelog.commands.acl", "tidelog.commands.user",
)
# A broker restarted on existing logs loads them before it answers, so these are on its path there.
LOADED_BY_LOGS = ("tidelog.storage.log", "tidelog.protocol.crc")
if len(sys.argv) > 2:  # "restart": the log dir holds a topic
    NOT_ON_THE_PATH = tuple(n for n in NOT_ON_THE_PATH if n not in LOADED_BY_LOGS)
TOPS = {name.split(".")[0] for name in NOT_ON_THE_PATH}
HANDLERS_USED = {"tidelog.broker.apis.api_versions", "tidelog.broker.apis.metadata", "tidelog.broker.apis._shared"}


class HoldServices:
    # The coordinators load right after `ready` on a worker thread: held until the answers are checked.
    def __init__(self):
        self.release = threading.Event()

    def at(self, point, subject=None):
        if str(point) == "coordinators-load":
            self.release.wait(60)


def frame(api_key, version, correlation_id, body, flexible=False):
    payload = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"probe" + (b"\\x00" if flexible else b"")
    return struct.pack(">i", len(payload + body)) + payload + body


def read_frame(sock):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "closed"
            buf += chunk
        return buf
    return exact(struct.unpack(">i", exact(4))[0])


tidelog.cli.build_parser().parse_args(["serve", "--override", "log.dirs=x"])  # as tidelog serve parses its argv
configure_logging("console", "INFO", hold=True)  # as tidelog serve: start-up's lines are written once started
cfg = BrokerConfig.load(None, {}, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1]})


async def main():
    hold = HoldServices()
    server = Server(cfg, faults=FaultInjector(hold))
    sock = socket.create_server(("127.0.0.1", 0))
    await server.start(sock=sock, load_services_after_ready=True, warm_up=False)
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as client:
        answers = []
        # ApiVersions v0 and v3, Metadata v1 (all topics) and v12 (no topic; compact array, tagged fields)
        for cid, request in enumerate([
                frame(18, 0, 1, b""),
                frame(18, 3, 2, b"\\x06probe\\x041.0\\x00", flexible=True),
                frame(3, 1, 3, struct.pack(">i", -1)),
                frame(3, 12, 4, b"\\x01\\x00\\x00\\x00", flexible=True)], start=1):
            client.sendall(request)
            answers.append(struct.unpack_from(">i", await asyncio.to_thread(read_frame, client))[0] == cid)
    print("answered:", answers)
    print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in TOPS and any(
        m == name or m.startswith(name + ".") for name in NOT_ON_THE_PATH)))
    print("handlers:", sorted(m for m in sys.modules if m.startswith("tidelog.broker.apis.") and m not in HANDLERS_USED))
    print("logs loaded:", all(m in sys.modules for m in LOADED_BY_LOGS))
    hold.release.set()
    await server.wait_services_loaded()
    release_held_logs()
    await server.stop()

asyncio.run(main())
"""


def probe(log_dir: Path, *restart: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(log_dir), *restart], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_first_answers_import_nothing_their_path_does_not_need(tmp_path: Path) -> None:
    assert probe(tmp_path) == ["answered: [True, True, True, True]", "loaded: []", "handlers: []",
                               "logs loaded: False"]


def test_a_restarted_broker_loads_its_logs_without_the_codec_libraries(tmp_path: Path) -> None:
    """On existing logs storage (and protocol.records with it) is on the path; the codec libraries are imported
    when a compressed batch first needs them, not by the import of records.py."""
    with run_broker(log_dir=tmp_path, topics={"restart": 2}):
        pass
    assert probe(tmp_path, "restart") == ["answered: [True, True, True, True]", "loaded: []", "handlers: []",
                                          "logs loaded: True"]
