"""Apache Kafka Java client 3.9.1: 20,000 keyed records with headers per codec, read back exactly."""

from __future__ import annotations

import pytest

from .conftest import JavaClient
from .records import CODECS, COUNT, CREATE_TIME, PARTITIONS, Rec, assert_round_trip

pytestmark = pytest.mark.java


def java_consume(java: JavaClient, bootstrap: str, topic: str, count: int = COUNT) -> list[Rec]:
    lines = java.run("consume", bootstrap, topic, str(count), str(PARTITIONS))
    got = []
    for d in lines[:-1]:
        assert d["tt"] == CREATE_TIME
        hs = tuple((k, bytes.fromhex(v)) for k, v in d["h"])
        got.append(Rec(d["p"], d["o"], d["ts"], bytes.fromhex(d["k"]), bytes.fromhex(d["v"]), hs))
    assert lines[-1] == {"done": len(got)}
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(tidelog_module_broker, java_client: JavaClient, codec: str) -> None:
    def produce(bootstrap: str, topic: str, codec: str, base_ts: int) -> None:
        out = java_client.run("produce", bootstrap, topic, str(COUNT), str(PARTITIONS), codec, str(base_ts))
        assert out[-1] == {"acked": COUNT, "misplaced": 0, "error": None}

    def consume(bootstrap: str, topic: str) -> list[Rec]:
        return java_consume(java_client, bootstrap, topic)

    assert_round_trip(tidelog_module_broker, f"java-{codec}", codec, produce, consume)
