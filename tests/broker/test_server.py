"""Server lifecycle: in-process brokers, the `tidelog serve` process (config layers, signals, logs),
metrics, and the pytest fixtures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tidelog.broker.metrics import BrokerMetrics
from tidelog.protocol.messages import request_class
from tidelog.protocol.records import Record, build_batch
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, BrokerProcess, KafkaWire, free_port, run_broker

ROOT = Path(__file__).resolve().parents[2]


def node_id_of(bootstrap: str) -> int:
    with KafkaWire(bootstrap) as wire:
        response = wire.request(3, 1, request_class(3)[1](topics=None))
    assert response.controller_id == response.brokers[0].node_id
    return int(response.brokers[0].node_id)


def test_fixtures(tidelog_broker: BrokerHandle, tidelog_bootstrap: str) -> None:
    assert tidelog_bootstrap == tidelog_broker.bootstrap == f"127.0.0.1:{tidelog_broker.port}"
    state = tidelog_broker.state
    assert state.advertised_port == tidelog_broker.port and state.node_id == 1
    assert len(state.cluster_id) == 22
    assert Path(tidelog_broker.log_dir).is_dir()
    assert node_id_of(tidelog_bootstrap) == 1


def test_run_broker_temp_dir_is_removed_and_port_released() -> None:
    with run_broker() as b:
        log_dir = Path(b.log_dir)
        assert log_dir.is_dir()
        node_id_of(b.bootstrap)
    assert not log_dir.exists()
    with run_broker(port=b.port) as again:  # the port is free again after a clean stop
        assert again.port == b.port


def test_two_brokers_in_one_process_have_separate_metrics(
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    a = tidelog_broker_factory(overrides={"metrics.port": "0", "node.id": "5"})
    b = tidelog_broker_factory(overrides={"metrics.port": "0", "node.id": "6"})
    for broker in (a, b):
        deadline = time.monotonic() + 60
        while broker.state.metrics.http_port is None:  # started by the warm-up thread
            assert time.monotonic() < deadline, "metrics endpoint did not start"
            time.sleep(0.05)
    assert (node_id_of(a.bootstrap), node_id_of(b.bootstrap)) == (5, 6)
    node_id_of(a.bootstrap)
    labels = {"api": "metadata", "error_code": "0"}
    assert a.state.metrics.sample("tidelog_requests_total", labels) == 2
    assert b.state.metrics.sample("tidelog_requests_total", labels) == 1
    text = urllib.request.urlopen(f"http://127.0.0.1:{a.state.metrics.http_port}/metrics", timeout=60).read()
    assert b'tidelog_requests_total{api="metadata",error_code="0"} 2.0' in text
    assert b"tidelog_request_latency_seconds_bucket" in text and b"tidelog_network_bytes_in_total" in text
    assert b"tidelog_partition_count" in text


def test_request_metrics_are_consistent_on_the_endpoint(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """Counts, latency histogram and byte counters as scraped: each histogram's +Inf bucket is the API's request
    count, buckets only grow with their bound, and bytes in/out cover what the client sent and received."""
    broker = tidelog_broker_factory(overrides={"metrics.port": "0"})
    port = broker.state.metrics.wait_http_port()
    for _ in range(5):
        node_id_of(broker.bootstrap)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("tidelog_")}
    count = samples['tidelog_requests_total{api="metadata",error_code="0"}']
    assert count == 5
    buckets = [v for k, v in samples.items() if k.startswith('tidelog_request_latency_seconds_bucket{api="metadata"')]
    assert buckets == sorted(buckets) and buckets[-1] == count
    assert samples['tidelog_request_latency_seconds_count{api="metadata"}'] == count
    assert 0 < samples['tidelog_request_latency_seconds_sum{api="metadata"}'] < 60
    assert samples["tidelog_network_bytes_in_total"] > 5 * 12 and samples["tidelog_network_bytes_out_total"] > 5 * 12
    assert samples["tidelog_connections"] >= 0


class _OneGauge:
    def __init__(self, name: str) -> None:
        self.name = name

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        yield GaugeMetricFamily(self.name, "test gauge", value=1)


def test_collectors_added_before_and_after_the_registry_starts_are_both_scraped() -> None:
    metrics = BrokerMetrics()
    metrics.add_collector(_OneGauge("early"))  # a subsystem built before start() (the registry does not exist)
    metrics.start()
    metrics.add_collector(_OneGauge("late"))  # one built after the warm-up thread started it
    assert (metrics.sample("early"), metrics.sample("late")) == (1.0, 1.0)


def test_a_served_broker_scrapes_the_subsystems_it_builds_after_ready(tmp_path: Path) -> None:
    """`tidelog serve` builds fetch sessions, client metrics, the coordinators and the cleaner after its first
    answers, while the warm-up thread may already have started the registry: every collector is scraped."""
    port = free_port()
    proc = BrokerProcess(tmp_path / "data", args=["--metrics-port", str(port)])
    proc.start()
    try:
        node_id_of(proc.bootstrap)
        deadline = time.monotonic() + 60
        while True:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline, "metrics endpoint did not start"
                time.sleep(0.05)
    finally:
        proc.stop()
    for family in ("tidelog_NumIncrementalFetchSessions", "tidelog_transaction_coordinator_transactional_ids",
                   "kafka_log_logcleanermanager_uncleanable_partitions_count", "kafka_server_controllermutation_tokens"):
        assert f"# TYPE {family}" in text, family


def test_log_size_metrics(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory()
    broker.call(lambda: broker.state.topics.create_topic("sized", 2, 1, {}))
    broker.state.metrics.start()  # registry without HTTP (idempotent if the warm-up already did it)
    assert broker.state.metrics.sample("tidelog_partition_count") == 2
    # One batch in partition 1: its size is exactly that batch's bytes, partition 0 stays empty.
    data = bytes(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")], 0))
    log = broker.state.topics.log(TopicPartition("sized", 1))
    assert log is not None
    broker.call(lambda: log.append_as_leader(data))
    sizes = [broker.state.metrics.sample("tidelog_log_size_bytes", {"topic": "sized", "partition": str(p)})
             for p in (0, 1)]
    assert sizes == [0, len(data)]


def test_serve_process_ready_line_and_clean_sigterm(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", args=["--node-id", "3"])
    proc.start()
    try:
        assert node_id_of(proc.bootstrap) == 3
        deadline = time.monotonic() + 60
        while "tidelog ready: listening on" not in proc.output():
            assert time.monotonic() < deadline, proc.output()
            time.sleep(0.05)
    finally:
        code = proc.stop()
    assert code == 0, proc.output()
    assert "Shut down cleanly" in proc.output()
    if (ROOT / "tidelog" / "storage" / "log_manager.py").exists():
        assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_serve_process_kill_and_restart_same_port(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data")
    proc.start()
    try:
        with KafkaWire(proc.bootstrap) as wire:
            cluster_id = wire.request(3, 2, request_class(3)[2](topics=None)).cluster_id
        proc.kill()
        assert proc.proc is not None and proc.proc.returncode == -9
        proc.restart()
        with KafkaWire(proc.bootstrap) as wire:
            assert wire.request(3, 2, request_class(3)[2](topics=None)).cluster_id == cluster_id
    finally:
        proc.stop()


def test_config_layers_file_env_override(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# test\nnode.id=7\nauto.create.topics.enable=false\n")
    env = dict(os.environ)
    proc = BrokerProcess(tmp_path / "data", env=env, args=["--config", str(props)])
    try:
        proc.start()
        assert node_id_of(proc.bootstrap) == 7  # from the file
        proc.stop()
        assert proc.env is not None
        proc.env["TIDELOG_NODE_ID"] = "8"
        proc.log_dir = str(tmp_path / "data8")  # meta.properties pins a log dir to its node.id
        proc.start()
        assert node_id_of(proc.bootstrap) == 8  # environment beats the file
        proc.stop()
        proc.args += ["--override", "node.id=9"]
        proc.log_dir = str(tmp_path / "data9")
        proc.start()
        assert node_id_of(proc.bootstrap) == 9  # --override beats both
    finally:
        proc.stop()


def test_json_logs(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", args=["--log-format", "json"])
    proc.start()
    with KafkaWire(proc.bootstrap) as wire:  # an unknown api key: one warning line, connection closed
        wire.sock.sendall(wire.frame(999, 0, b""))
        assert wire.is_closed()
    assert proc.stop() == 0
    lines = [ln for ln in proc.output().splitlines() if ln.strip() and not ln.startswith("tidelog ready")]
    events = [json.loads(ln) for ln in lines]
    assert all("event" in e and "level" in e and "timestamp" in e for e in events)
    closed = [e for e in events if "unknown api key 999" in e["event"]]
    assert len(closed) == 1 and closed[0]["level"] == "warning"


def test_config_error_exits_2(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tidelog", "serve", "--override", "node.id=-4", "--log-dirs",
                          str(tmp_path)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 2
    assert "configuration error" in out.stderr and "node.id" in out.stderr


def test_cli_help_lists_commands() -> None:
    out = subprocess.run([sys.executable, "-m", "tidelog", "--help"], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0 and "serve" in out.stdout and "dump-log" in out.stdout


def test_handler_exception_is_answered_and_the_connection_kept(
        caplog: Any, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A handler bug (Kafka's KafkaApis.handleError): one log line with the request header and the traceback,
    the API's own error response (UNKNOWN_SERVER_ERROR per requested topic), the connection stays open."""
    import types

    from tidelog.broker.apis import API_TABLE, ApiEntry
    from tidelog.broker.registry import ApiRegistry

    boom = types.ModuleType("boom_for_test")
    boom.API_KEY = 3  # type: ignore[attr-defined]

    async def handle(ctx: Any, request: Any) -> Any:
        raise RuntimeError("handler bug")

    boom.handle = handle  # type: ignore[attr-defined]
    table = [ApiEntry(3, "boom_for_test", 0, 12)] + [e for e in API_TABLE if e.key == 18]
    metadata = request_class(3)[1]
    b = tidelog_broker_factory(registry=ApiRegistry(table, modules={"boom_for_test": boom}))
    with KafkaWire(b.bootstrap) as wire:
        response = wire.request(3, 1, metadata(topics=[metadata.MetadataRequestTopic(name="t1")]))
        assert [(t.name, t.error_code) for t in response.topics] == [("t1", -1)]
        assert response.brokers == []
        # ApiVersions advertises exactly this server's table, on the same connection.
        versions = wire.request(18, 0, request_class(18)[0]())
    assert sorted(k.api_key for k in versions.api_keys) == [3, 18]
    [logged] = [r for r in caplog.records if r.exc_info and "handler bug" in repr(r.exc_info[1])]
    assert "boom_for_test v1 request (correlation id" in logged.getMessage()
    assert "UNKNOWN_SERVER_ERROR" in logged.getMessage()


STARTUP_PROBE = """
import asyncio, logging, socket, struct, sys
from tidelog.config.broker_config import BrokerConfig
from tidelog.broker.server import Server
from tidelog.logging import configure_logging

LAZY = ("tidelog.storage", "tidelog.cleaner", "tidelog.coordinator.group", "tidelog.broker.topics", "tidelog.broker.purgatory", "tidelog.broker.producer_ids",
        "prometheus_client", "structlog", "kafka.protocol.consumer", "kafka.protocol.producer",
        "kafka.protocol.admin", "lz4", "zstandard", "cramjam", "snappy", "crc32c")

def loaded(prefixes=LAZY):
    found = [m for m in sys.modules if m.startswith(prefixes) and m.split(".")[0] in {p.split(".")[0] for p in prefixes}]
    found += [m for m in sys.modules if m.startswith("tidelog.broker.apis.") and m != "tidelog.broker.apis.api_versions"]
    return sorted(found)

def frame(api_key, version, correlation_id, body):
    payload = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"probe" + body
    return struct.pack(">i", len(payload)) + payload

def read_frame(sock):
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "closed"
            buf += chunk
        return buf
    return exact(struct.unpack(">i", exact(4))[0])

configure_logging("console", "INFO")
cfg = BrokerConfig.load(None, {}, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1]})

async def main():
    server = Server(cfg)
    print("after Server():", loaded())
    await server.start_listening()
    addr = ("127.0.0.1", server.port)
    first = socket.create_connection(addr, timeout=60)
    first.sendall(frame(3, 1, 7, struct.pack(">i", -1)))  # Metadata v1, all topics: waits for the logs
    second = socket.create_connection(addr, timeout=60)
    second.sendall(frame(18, 0, 8, b""))
    early = await asyncio.to_thread(read_frame, second)
    print("ApiVersions answered while loading:", struct.unpack_from(">i", early)[0] == 8)
    print("after ApiVersions:", loaded())
    first.setblocking(False)
    try:
        print("Metadata answered before ready:", len(first.recv(1)) > 0)
    except BlockingIOError:
        print("Metadata answered before ready:", False)
    first.setblocking(True)
    await server.finish_startup(warm_up=False)
    metadata = await asyncio.to_thread(read_frame, first)
    print("Metadata answered after ready:", struct.unpack_from(">i", metadata)[0] == 7)
    second.sendall(frame(18, 0, 9, b""))
    late = await asyncio.to_thread(read_frame, second)
    print("same ApiVersions after loading:", early[4:] == late[4:])
    print("kafka client modules:", sorted(m for m in sys.modules if m.startswith(("kafka.admin", "kafka.producer",
          "kafka.consumer", "kafka.protocol.consumer", "kafka.protocol.producer", "kafka.protocol.admin"))))
    print("prometheus:", "prometheus_client" in sys.modules)
    logging.getLogger("probe").warning("first line")
    print("structlog after a log line:", "structlog" in sys.modules)
    first.close(); second.close()
    await server.stop()

asyncio.run(main())
"""


def test_startup_answers_api_versions_before_loading_anything_else(tmp_path: Path) -> None:
    """Start-up stays fast (clients probe with ApiVersions first): the listener answers ApiVersions with nothing but its
    handler and kafka-python's ApiVersions classes loaded; storage, groups, cleaner, the other handlers,
    compression codecs, the rest of kafka-python, prometheus_client and structlog load later (or never, until
    used), and other requests wait until the logs are loaded."""
    out = subprocess.run([sys.executable, "-c", STARTUP_PROBE, str(tmp_path)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "after Server(): []",
        "ApiVersions answered while loading: True",
        "after ApiVersions: []",
        "Metadata answered before ready: False",
        "Metadata answered after ready: True",
        "same ApiVersions after loading: True",
        "kafka client modules: []",
        "prometheus: False",
        "structlog after a log line: True",
    ], out.stderr
    assert "first line" in out.stderr and "[warning  ]" in out.stderr  # rendered by structlog's console renderer
    assert "[info     ] loaded" in out.stderr  # the start-up lines logged while loading, through structlog too


def test_api_table_answers_without_importing_handlers() -> None:
    """The static API table gives ApiVersions' ranges with no handler imported; load() imports every
    registered handler (a broken one fails start-up instead of silently going unadvertised)."""
    code = """
import sys
from tidelog.broker.registry import ApiRegistry
registry = ApiRegistry()
ranges = registry.advertised_ranges()
print(any(m.startswith("tidelog.broker.apis.") for m in sys.modules))
registry.load()
print(sorted(m for m in sys.modules if m.startswith("tidelog.broker.apis.") and not m.endswith("_shared"))
      == sorted("tidelog.broker.apis." + e.module for e in registry.entries.values()))
print(len(ranges))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    imported_any, all_loaded, count = out.stdout.splitlines()
    assert imported_any == "False"
    assert all_loaded == "True"
    assert int(count) > 20


def test_serve_help_is_as_wide_as_the_terminal() -> None:
    """The CLI sizes argparse's help from COLUMNS or the terminal, as shutil.get_terminal_size() would."""
    def widest(columns: str) -> int:
        out = subprocess.run([sys.executable, "-m", "tidelog", "serve", "--help"], capture_output=True, text=True,
                             timeout=60, cwd=ROOT, env=dict(os.environ, COLUMNS=columns, PYTHONPATH=str(ROOT)))
        assert out.returncode == 0, out.stderr
        return max(len(line) for line in out.stdout.splitlines())

    assert widest("50") <= 50 < widest("200")


def _serve_with_tls(tmp_path: Path, **ssl_config: str) -> subprocess.CompletedProcess[str]:
    overrides = {"listeners": "SSL://127.0.0.1:0", "ssl.client.auth": "required", **ssl_config}
    args = [a for k, v in overrides.items() for a in ("--override", f"{k}={v}")]
    return subprocess.run([sys.executable, "-m", "tidelog", "serve", "--log-dirs", str(tmp_path / "data"), *args],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_unloadable_keystore_or_truststore_stops_serve_with_one_line(tmp_path: Path) -> None:
    """A keystore or truststore OpenSSL cannot load stops `tidelog serve` with the one-line configuration
    error (exit 2), not a traceback."""
    from tidelog.security.throwaway_ca import ThrowawayCA

    ca = ThrowawayCA(tmp_path / "ca")
    server, other = ca.issue("broker", server=True), ca.issue("other", server=True)
    mismatched = tmp_path / "mismatched.pem"  # one certificate's key with another's chain
    mismatched.write_bytes(server.key_pem.read_bytes() + other.cert_pem.read_bytes())
    bad_ca = tmp_path / "bad-ca.pem"
    bad_ca.write_text("-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----\n")
    for config, what in (({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(mismatched)}, "keystore"),
                         ({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.keystore_pem),
                           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(bad_ca)}, "truststore")):
        out = _serve_with_tls(tmp_path, **config)
        assert out.returncode == 2, out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tidelog: configuration error: ") and what in lines[0], (
            out.stderr)
