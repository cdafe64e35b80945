"""tidelog's ApiVersions answer against Apache Kafka 4.3's (kafka-python 3.0.12 records each release's answer in
`kafka.protocol.broker_version_data`): every served API advertises Kafka 4.3's range, or is listed below with
the work that brings it there. Also what kafka-python's release probe makes of our answer."""

from __future__ import annotations

from typing import Any

from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

API_VERSIONS = 18
KAFKA_43 = BROKER_API_VERSIONS[(4, 3)]

# api key -> (tidelog's advertised range, why it differs from Kafka 4.3 and what brings it level)
KNOWN_DIFFERENCES: dict[int, tuple[tuple[int, int], str]] = {
    24: ((0, 3), "AddPartitionsToTxn 4-5 are the broker-to-coordinator verify form (KIP-890 part 1); clients use "
                 "0-3 and this single node verifies Produce in-process"),
    26: ((0, 4), "EndTxn 5: KIP-890 part 2 (transaction version 2, epoch bump per transaction)"),
    28: ((0, 4), "TxnOffsetCommit 5: KIP-890 part 2 (transaction version 2)"),
}

# api key -> (tidelog's advertised range, why it is advertised although the recorded Kafka 4.3 answer lacks it)
BEYOND_DEFAULT_KAFKA: dict[int, tuple[tuple[int, int], str]] = {
    71: ((0, 0), "GetTelemetrySubscriptions: Kafka advertises KIP-714 only with a ClientTelemetry metrics reporter "
                 "plugin; tidelog is its own reporter (Prometheus)"),
    72: ((0, 0), "PushTelemetry: as 71"),
}


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    cls = request_class(API_VERSIONS)[4]
    with KafkaWire(bootstrap) as wire:
        response = wire.request(API_VERSIONS, 4, cls(client_software_name="tidelog-test",
                                                     client_software_version="1.0"))
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_every_served_api_advertises_kafka_43_range_or_a_listed_difference(broker: BrokerHandle) -> None:
    ours = advertised(broker.bootstrap)
    mismatched: dict[int, Any] = {}
    for key, ranges in sorted(ours.items()):
        if key in BEYOND_DEFAULT_KAFKA:
            assert key not in KAFKA_43 and ranges == BEYOND_DEFAULT_KAFKA[key][0], key
            continue
        assert key in KAFKA_43, f"api {key} is not served by Kafka 4.3 at all"
        if ranges == KAFKA_43[key]:
            assert key not in KNOWN_DIFFERENCES, f"api {key} now matches Kafka 4.3: drop it from KNOWN_DIFFERENCES"
            continue
        listed = KNOWN_DIFFERENCES.get(key)
        if listed is None or listed[0] != ranges:
            mismatched[key] = (ranges, KAFKA_43[key])
    assert not mismatched, f"(tidelog, Kafka 4.3) ranges that differ without a listed reason: {mismatched}"
    # A listed difference for an API no longer served is stale too.
    assert set(KNOWN_DIFFERENCES) <= set(ours)


def test_kafka_python_identifies_our_answer_as_kafka_4_3(broker: BrokerHandle) -> None:
    """kafka-python's probe reads 4.3 from DescribeLogDirs v5 and 4.2 from ListOffsets v11, both served."""
    ours = advertised(broker.bootstrap)
    assert ours[35][1] >= 5 and ours[2][1] >= 11
    assert infer_broker_version_from_api_versions(ours) == (4, 3)
    # the markers below them are ours too: Produce v13 (4.1), ListOffsets v10 (4.0), Fetch v17 (3.9)
    older = {**ours, 2: (1, 10), 35: (1, 4)}
    assert infer_broker_version_from_api_versions(older) == (4, 1)
    assert infer_broker_version_from_api_versions({**older, 0: (0, 12)}) == (4, 0)
    assert infer_broker_version_from_api_versions({**older, 0: (0, 12), 2: (1, 9)}) == (3, 9)
