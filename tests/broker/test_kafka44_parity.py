"""tidelog's ApiVersions answer against Apache Kafka 4.4's (`tidelog.broker.kafka_versions.KAFKA_44`, from Kafka's
message JSON; its docstring says which ranges were read and which derived): every served API advertises Kafka
4.4's range, or its API_TABLE entry says why not in `difference` (the reason docs/APIS.md shows). The 4.4 table is
checked against Kafka 4.3's (kafka-python 3.0.12's record of that release's answer), so only the changes it names
can differ; and what kafka-python's release probe makes of our answer (it knows releases up to 4.3)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

from tidelog.broker.apis import API_TABLE
from tidelog.broker.kafka_versions import KAFKA_43, KAFKA_44, KAFKA_44_CHANGES
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

API_VERSIONS = 18

# api key -> why its advertised range is not Kafka 4.4's: 71/72 Kafka advertises only with a telemetry reporter
# plugin
KNOWN_DIFFERENCES: dict[int, str] = {int(e.key): e.difference for e in API_TABLE if e.difference}


def advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    cls = request_class(API_VERSIONS)[4]
    with KafkaWire(bootstrap) as wire:
        response = wire.request(API_VERSIONS, 4, cls(client_software_name="tidelog-test",
                                                     client_software_version="1.0"))
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_kafka_44_table_is_kafka_43_plus_the_listed_changes() -> None:
    """The 4.4 table moves from kafka-python's 4.3 record exactly where KAFKA_44_CHANGES names a source, and only
    upwards: maxima raised or keys added (4.4 removed no version and no key)."""
    moved = {key for key in set(KAFKA_43) | set(KAFKA_44) if KAFKA_43.get(key) != KAFKA_44.get(key)}
    assert moved == set(KAFKA_44_CHANGES) == {18, 28, 42, 88, 89, 93, 94}
    for key in moved:
        assert KAFKA_44_CHANGES[key].strip()
        low, high = KAFKA_44[key]
        if key in KAFKA_43:
            assert low == KAFKA_43[key][0] and high > KAFKA_43[key][1], key
        else:
            assert (low, high) == (0, 0), key  # a new key starts at v0
    assert set(KAFKA_43) <= set(KAFKA_44)
    # the maxima the 4.4 message JSON gives (validVersions), one per moved key
    assert {key: KAFKA_44[key][1] for key in moved} == {18: 5, 28: 6, 42: 3, 88: 1, 89: 1, 93: 0, 94: 0}


def test_every_served_api_advertises_kafka_44_range_or_a_listed_difference(tidelog_module_broker: BrokerHandle) -> None:
    ours = advertised(tidelog_module_broker.bootstrap)
    assert set(ours) == {int(e.key) for e in API_TABLE}
    mismatched: dict[int, Any] = {}
    for key, ranges in sorted(ours.items()):
        if ranges == KAFKA_44.get(key):
            assert key not in KNOWN_DIFFERENCES, f"api {key} now matches Kafka 4.4: drop its `difference`"
        elif not KNOWN_DIFFERENCES.get(key, "").strip():
            mismatched[key] = (ranges, KAFKA_44.get(key))
    assert not mismatched, f"(tidelog, Kafka 4.4) ranges that differ without a `difference` reason: {mismatched}"
    # the differing ranges themselves, so a reason cannot outlive the range it explains unnoticed
    assert {key: ours[key] for key in KNOWN_DIFFERENCES} == {71: (0, 0), 72: (0, 0)}
    assert {key: KAFKA_44.get(key) for key in KNOWN_DIFFERENCES} == {71: None, 72: None}
    # Kafka 4.4's range for every served API Kafka advertises, the 4.4 additions included
    shared = [key for key in ours if key in KAFKA_44]
    assert {key: ours[key] for key in shared} == {key: KAFKA_44[key] for key in shared}
    assert {key: ours[key] for key in (18, 28, 42, 88, 89, 93)} == {
        18: (0, 5), 28: (0, 6), 42: (0, 3), 88: (0, 1), 89: (0, 1), 93: (0, 0)}


def test_against_kafka_43_only_the_44_changes_and_the_telemetry_keys_differ(tidelog_module_broker: BrokerHandle) -> None:
    """The 4.3 comparison the project made before 4.4: what moved since is all Kafka 4.4's."""
    ours = advertised(tidelog_module_broker.bootstrap)
    differing = {key for key, ranges in ours.items() if ranges != KAFKA_43.get(key)}
    assert differing == {18, 28, 42, 71, 72, 88, 89, 93}
    assert differing - {71, 72} <= set(KAFKA_44_CHANGES)


def test_kafka_python_identifies_our_answer_as_kafka_4_3(tidelog_module_broker: BrokerHandle) -> None:
    """kafka-python 3.0.12 knows no 4.4: its probe reads 4.3 from DescribeLogDirs v5 and 4.2 from ListOffsets v11,
    both served."""
    ours = advertised(tidelog_module_broker.bootstrap)
    assert ours[35][1] >= 5 and ours[2][1] >= 11
    assert infer_broker_version_from_api_versions(ours) == (4, 3)
    # the markers below them are ours too: Produce v13 (4.1), ListOffsets v10 (4.0), Fetch v17 (3.9)
    older = {**ours, 2: (1, 10), 35: (1, 4)}
    assert infer_broker_version_from_api_versions(older) == (4, 1)
    assert infer_broker_version_from_api_versions({**older, 0: (0, 12)}) == (4, 0)
    assert infer_broker_version_from_api_versions({**older, 0: (0, 12), 2: (1, 9)}) == (3, 9)
