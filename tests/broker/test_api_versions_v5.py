"""ApiVersions v5 (KIP-1242, Kafka 4.4: detection of misrouted connections) on the raw wire. A v5 request may
name the cluster (ClusterId, nullable) and node (NodeId, int32, -1 when unset) it means to reach. Kafka's
KafkaApis.handleApiVersionsRequest answers INVALID_REQUEST when only one of them is given (ApiVersionsRequest
.isValid: franz-go PR #1449 saw a Kafka 4.4.0-rc1 broker refuse a NodeId without a ClusterId), REBOOTSTRAP_REQUIRED
(129) when either is not this broker's (KafkaApis.clusterIdOrNodeIdIsInvalid, apache/kafka PR #22187 and
#23171; ApiVersionsRequestTest.testApiVersionsRequestMetadataClusterCheckFail), both without api keys or
features; a request naming neither is answered as v4 is. No client the suite runs sends v5 (librdkafka,
kafka-python and the Java 3.9.1 client stop at v4), so these requests are built byte by byte."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class, response_class
from tidelog.testing import BrokerHandle, KafkaWire

API_VERSIONS, METADATA = 18, 3
REBOOTSTRAP_REQUIRED = 129


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    assert len(raw) < 127  # one-byte uvarint length
    return bytes([len(raw) + 1]) + raw


def v5_body(cluster_id: str | None, node_id: int, name: str = "tidelog-test", version: str = "1.0") -> bytes:
    """ApiVersionsRequest v5 as Kafka's JSON lays it out: ClientSoftwareName, ClientSoftwareVersion (compact
    strings), ClusterId (compact nullable string), NodeId (int32), then the (empty) tagged fields."""
    return (_compact_string(name) + _compact_string(version) + _compact_string(cluster_id)
            + struct.pack(">i", node_id) + b"\x00")


def ask(wire: KafkaWire, body: bytes, version: int = 5) -> Any:
    """Send one ApiVersions request body; its decoded response (header v0, as every ApiVersions answer)."""
    return wire.request(API_VERSIONS, version, body)


def ask_error(wire: KafkaWire, body: bytes) -> int:
    """Send one v5 request that must fail; its error code, after checking the bytes are Kafka's error body at the
    request's version (kafka-python's reader would take any error body for v0): header v0 (correlation id),
    ErrorCode, an empty compact ApiKeys array, ThrottleTimeMs and no tagged fields (no features)."""
    correlation_id = wire.send(API_VERSIONS, 5, body)
    frame = wire.read_frame()
    got, error_code, keys, _throttle, tags = struct.unpack(">ihBiB", frame)
    assert (got, keys, tags) == (correlation_id, 1, 0)
    return int(error_code)


@pytest.fixture(scope="module")
def identity(tidelog_module_broker: BrokerHandle) -> tuple[str, int]:
    """This broker's cluster id and node id, as a client learns them from Metadata."""
    cls = request_class(METADATA)[12]
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        meta = wire.request(METADATA, 12, cls(topics=[], allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
    [broker] = meta.brokers
    return meta.cluster_id, broker.node_id


def test_the_right_cluster_and_node_get_the_full_answer(tidelog_module_broker: BrokerHandle,
                                                        identity: tuple[str, int]) -> None:
    cluster_id, node_id = identity
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        checked = ask(wire, v5_body(cluster_id, node_id))
        unchecked = ask(wire, v5_body(None, -1))  # a seed connection: nothing known yet, nothing checked
        v4 = wire.request(API_VERSIONS, 4, request_class(API_VERSIONS)[4](client_software_name="tidelog-test",
                                                                          client_software_version="1.0"))
    for response in (checked, unchecked):
        assert response.error_code == ErrorCode.NONE
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[API_VERSIONS] == (0, 5) and ranges[28] == (0, 6)
        assert ranges == {k.api_key: (k.min_version, k.max_version) for k in v4.api_keys}
        assert response.finalized_features == v4.finalized_features
        assert response.supported_features == v4.supported_features
        assert response.finalized_features_epoch == v4.finalized_features_epoch >= 0


@pytest.mark.parametrize("wrong", ["node", "cluster", "both", "empty cluster id"])
def test_another_node_or_cluster_is_told_to_rebootstrap(tidelog_module_broker: BrokerHandle,
                                                        identity: tuple[str, int], wrong: str) -> None:
    cluster_id, node_id = identity
    named = {"node": (cluster_id, node_id + 1), "cluster": ("AAAAAAAAAAAAAAAAAAAAAA", node_id),
             "both": ("some-other-cluster", node_id + 7), "empty cluster id": ("", node_id)}[wrong]
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        assert ask_error(wire, v5_body(*named)) == REBOOTSTRAP_REQUIRED  # no api keys, no features
        # the answer is an error body, not a closed connection: the client decides (Kafka's NetworkClient
        # disconnects and rebootstraps); this connection still answers
        again = ask(wire, v5_body(cluster_id, node_id))
    assert again.error_code == ErrorCode.NONE


@pytest.mark.parametrize(("cluster_id", "node_id"), [
    (None, 0),  # franz-go #1449: kcl's struct literal left NodeId 0 and no ClusterId; Kafka 4.4 answered 42
    (None, 5),
    ("named-without-node", -1),
])
def test_one_of_cluster_and_node_without_the_other_is_an_invalid_request(
        tidelog_module_broker: BrokerHandle, identity: tuple[str, int], cluster_id: str | None, node_id: int) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        assert ask_error(wire, v5_body(cluster_id, node_id)) == ErrorCode.INVALID_REQUEST
        # the same with this broker's own cluster id: the pairing is checked before the identity
        if cluster_id is not None:
            assert ask_error(wire, v5_body(identity[0], -1)) == ErrorCode.INVALID_REQUEST
        assert ask(wire, v5_body(None, -1)).error_code == ErrorCode.NONE


def test_bad_software_strings_are_invalid_before_any_identity_check(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        assert ask_error(wire, v5_body("some-other-cluster", 9, name="bad name!")) == ErrorCode.INVALID_REQUEST


def test_the_codec_writes_the_bytes_built_here(identity: tuple[str, int]) -> None:
    """tidelog's ApiVersionsRequest v5 class (tidelog/protocol/schemas) lays the fields out as above, and a v4
    request ignores them (versions 5+)."""
    cls = request_class(API_VERSIONS)
    cluster_id, node_id = identity
    built = cls[5](client_software_name="tidelog-test", client_software_version="1.0", cluster_id=cluster_id,
                   node_id=node_id)
    assert bytes(built.encode(version=5)) == v5_body(cluster_id, node_id)
    assert cls[5](client_software_name="a", client_software_version="1").node_id == -1  # the JSON default
    v4 = cls[4](client_software_name="tidelog-test", client_software_version="1.0")
    assert bytes(v4.encode(version=4)) == v5_body(None, -1)[:-6] + b"\x00"
    assert response_class(API_VERSIONS)[5] is not None


def test_a_v6_request_gets_the_v0_unsupported_version_answer(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        wire.sock.sendall(wire.frame(API_VERSIONS, 6, v5_body(None, -1)))
        _, response = wire.receive(API_VERSIONS, 0)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(API_VERSIONS, 0, 5)]


LOADING_PROBE = r"""
import asyncio, struct, sys
from tidelog.broker.server import Server
from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.messages import request_class
from tidelog.testing import KafkaWire

def frame(wire, correlation_id, cluster_id, node_id):  # the v5 request the codec test pins to Kafka's layout
    request = request_class(18)[5](client_software_name="probe", client_software_version="1.0",
                                   cluster_id=cluster_id, node_id=node_id)
    return wire.frame(18, 5, request, correlation_id=correlation_id)

def read(wire):
    return struct.unpack_from(">ih", wire.read_frame())  # correlation id, error code

cfg = BrokerConfig.load(None, {}, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": sys.argv[1], "node.id": "3"})

async def main():
    first_start = Server(cfg)  # a data dir with its cluster id (meta.properties), as a restarted broker has
    await first_start.start(warm_up=False)
    cluster_id = first_start.broker.cluster_id
    await first_start.stop()
    server = Server(cfg)
    await server.start_listening()
    unchecked, checked = (KafkaWire(f"127.0.0.1:{server.port}") for _ in range(2))
    checked.sock.sendall(frame(checked, 1, cluster_id, 3))
    unchecked.sock.sendall(frame(unchecked, 2, None, -1))
    print("unchecked while loading:", await asyncio.to_thread(read, unchecked))
    checked.sock.setblocking(False)
    try:
        print("checked before ready:", len(checked.sock.recv(1)) > 0)
    except BlockingIOError:
        print("checked before ready:", False)
    checked.sock.setblocking(True)
    await server.finish_startup(warm_up=False)
    print("checked once loaded:", await asyncio.to_thread(read, checked))
    checked.sock.sendall(frame(checked, 3, cluster_id, 4))
    print("another node:", await asyncio.to_thread(read, checked))
    checked.close(); unchecked.close()
    await server.stop()

asyncio.run(main())
"""


def test_a_checked_request_waits_for_the_cluster_id_while_the_logs_load(tmp_path: Path) -> None:
    """ApiVersions is answered while the broker loads its logs (KIP-511, test_server.py), but a v5 request naming a
    cluster can only be checked against the cluster id the logs hold: it is answered once they are loaded."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", LOADING_PROBE, str(tmp_path)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(root)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "unchecked while loading: (2, 0)",
        "checked before ready: False",
        "checked once loaded: (1, 0)",
        f"another node: (3, {REBOOTSTRAP_REQUIRED})",
    ], out.stderr
