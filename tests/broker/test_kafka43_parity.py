"""tidelog's ApiVersions answer against Apache Kafka 4.3's (kafka-python 3.0.12 records each release's answer in
`kafka.protocol.broker_version_data`): every served API advertises Kafka 4.3's range, or its API_TABLE entry says
why not in `difference` (the reason docs/APIS.md shows). Also what kafka-python's release probe makes of our
answer."""

from __future__ import annotations

from typing import Any

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

from tidelog.broker.apis import API_TABLE
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

API_VERSIONS = 18
KAFKA_43 = BROKER_API_VERSIONS[(4, 3)]

# api key -> why its advertised range is not Kafka 4.3's (71/72 Kafka advertises only with a telemetry reporter
# plugin; DeleteGroups 3 and the streams group APIs' versions are Kafka 4.4's)
KNOWN_DIFFERENCES: dict[int, str] = {int(e.key): e.difference for e in API_TABLE if e.difference}


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    cls = request_class(API_VERSIONS)[4]
    with KafkaWire(bootstrap) as wire:
        response = wire.request(API_VERSIONS, 4, cls(client_software_name="tidelog-test",
                                                     client_software_version="1.0"))
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_every_served_api_advertises_kafka_43_range_or_a_listed_difference(tidelog_module_broker: BrokerHandle) -> None:
    ours = advertised(tidelog_module_broker.bootstrap)
    assert set(ours) == {int(e.key) for e in API_TABLE}
    mismatched: dict[int, Any] = {}
    for key, ranges in sorted(ours.items()):
        if ranges == KAFKA_43.get(key):
            assert key not in KNOWN_DIFFERENCES, f"api {key} now matches Kafka 4.3: drop its `difference`"
        elif not KNOWN_DIFFERENCES.get(key, "").strip():
            mismatched[key] = (ranges, KAFKA_43.get(key))
    assert not mismatched, f"(tidelog, Kafka 4.3) ranges that differ without a `difference` reason: {mismatched}"
    # the differing ranges themselves, so a reason cannot outlive the range it explains unnoticed
    assert {key: ours[key] for key in KNOWN_DIFFERENCES} == {42: (0, 3), 71: (0, 0), 72: (0, 0), 88: (0, 1),
                                                           89: (0, 1), 93: (0, 0)}


def test_kafka_python_identifies_our_answer_as_kafka_4_3(tidelog_module_broker: BrokerHandle) -> None:
    """kafka-python's probe reads 4.3 from DescribeLogDirs v5 and 4.2 from ListOffsets v11, both served."""
    ours = advertised(tidelog_module_broker.bootstrap)
    assert ours[35][1] >= 5 and ours[2][1] >= 11
    assert infer_broker_version_from_api_versions(ours) == (4, 3)
    # the markers below them are ours too: Produce v13 (4.1), ListOffsets v10 (4.0), Fetch v17 (3.9)
    older = {**ours, 2: (1, 10), 35: (1, 4)}
    assert infer_broker_version_from_api_versions(older) == (4, 1)
    assert infer_broker_version_from_api_versions({**older, 0: (0, 12)}) == (4, 0)
    assert infer_broker_version_from_api_versions({**older, 0: (0, 12), 2: (1, 9)}) == (3, 9)
