"""Feature levels (KIP-584) in ApiVersions, UpdateFeatures (57) and DescribeQuorum (55) over the raw wire, as a
Kafka 4.3 single-node KRaft cluster answers them; the finalized levels survive a restart."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.broker.features import FILE_NAME
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

API_VERSIONS, DESCRIBE_QUORUM, UPDATE_FEATURES = 18, 55, 57
INVALID_UPDATE_VERSION = 95
SAFE, UNSAFE = 2, 3


def api_versions(wire: KafkaWire, version: int) -> Any:
    cls = request_class(API_VERSIONS)[version]
    return wire.request(API_VERSIONS, version, cls(client_software_name="tidelog-test",
                                                   client_software_version="1.0"))


def features(response: Any) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], int]:
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    return supported, finalized, response.finalized_features_epoch


def update(wire: KafkaWire, changes: list[tuple[str, int, int]], validate_only: bool = False,
           version: int = 2) -> Any:
    cls = request_class(UPDATE_FEATURES)[version]
    K = cls.FeatureUpdateKey
    keys = [K(feature=name, max_version_level=level, upgrade_type=kind, allow_downgrade=kind != 1)
            for name, level, kind in changes]
    return wire.request(UPDATE_FEATURES, version, cls(timeout_ms=30_000, feature_updates=keys,
                                                      validate_only=validate_only))


def test_api_versions_v4_reports_kafka_43_feature_levels(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        supported, finalized, epoch = features(api_versions(wire, 4))
    assert supported == {"metadata.version": (7, 30), "kraft.version": (0, 1), "group.version": (0, 1),
                         "eligible.leader.replicas.version": (0, 1), "share.version": (0, 1),
                         "streams.version": (0, 1), "transaction.version": (0, 2)}
    assert finalized == {"metadata.version": (30, 30), "kraft.version": (1, 1), "group.version": (1, 1),
                         "eligible.leader.replicas.version": (1, 1), "share.version": (1, 1),
                         "streams.version": (1, 1), "transaction.version": (2, 2)}
    assert epoch >= 0


def test_api_versions_v3_leaves_out_features_with_minimum_zero(tidelog_module_broker: BrokerHandle) -> None:
    """KAFKA-17011: a v3 reader cannot take a supported minimum of 0, so only metadata.version is listed."""
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        supported, finalized, _ = features(api_versions(wire, 3))
    assert supported == {"metadata.version": (7, 30)}
    assert finalized["metadata.version"] == (30, 30)


@pytest.mark.parametrize(("changes", "message"), [
    ([("metadata.version", 31, 1)], "Invalid update version 31 for feature metadata.version. Local controller 1 "
                                    "only supports versions SupportedVersionRange[min_version:7, max_version:30]"),
    ([("metadata.version", 29, 1)], "Invalid update version 29 for feature metadata.version. Can't downgrade the "
                                    "version of this feature without setting the upgrade type to either safe or "
                                    "unsafe downgrade."),
    ([("metadata.version", 29, SAFE)], "Unsupported metadata.version downgrade from 30 to 29. Refusing to perform "
                                       "the requested downgrade because it might delete metadata information."),
    ([("metadata.version", 29, UNSAFE)], "Unsupported metadata.version downgrade from 30 to 29. Unsafe metadata "
                                         "downgrade is not supported in this version."),
    ([("kraft.version", 0, SAFE)], "Invalid update version 0 for feature kraft.version. Can't downgrade the "
                                   "version of this feature."),
    ([("transaction.version", 3, 1)], "Invalid update version 3 for feature transaction.version. Local controller 1 "
                                      "only supports versions SupportedVersionRange[min_version:0, max_version:2]"),
    ([("no.such.version", 1, 1)], "Invalid update version 1 for feature no.such.version. Local controller 1 "
                                  "does not support this feature."),
    ([("group.version", 2, 1)], "Invalid update version 2 for feature group.version. Local controller 1 only "
                                "supports versions SupportedVersionRange[min_version:0, max_version:1]"),
    ([("metadata.version", -1, 1)], "Invalid update version -1 for feature metadata.version. A feature version "
                                    "cannot be less than 0."),
    ([("metadata.version", 30, 7)], "Invalid update version 30 for feature metadata.version. The controller does "
                                    "not support the given upgrade type."),
])
def test_update_features_refusals(tidelog_module_broker: BrokerHandle, changes: list[tuple[str, int, int]], message: str) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        for validate_only in (True, False):
            response = update(wire, changes, validate_only)
            assert (response.error_code, response.error_message) == (INVALID_UPDATE_VERSION, message)
        assert features(api_versions(wire, 4))[1]["metadata.version"] == (30, 30)


def test_update_features_v0_v1_carry_per_feature_results(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        for version in (0, 1):
            ok = update(wire, [("metadata.version", 30, 1), ("kraft.version", 1, 1)], version=version)
            assert ok.error_code == 0
            assert {(r.feature, r.error_code) for r in ok.results} == {("metadata.version", 0), ("kraft.version", 0)}
        bad = update(wire, [("metadata.version", 29, 1)], version=1)
        assert bad.error_code == INVALID_UPDATE_VERSION
        assert [(r.feature, r.error_code) for r in bad.results] == [("metadata.version", INVALID_UPDATE_VERSION)]


def test_update_features_upgrade_downgrade_and_restart(tmp_path: Path,
                                                       tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """A node whose levels were finalized by 4.2 (metadata.version 29): upgrade to 4.3, safe downgrade across
    levels without metadata changes, validate_only changes nothing, and the levels survive a restart. The file
    was written by a tidelog that did not know group.version yet but served KIP-848: it reads as level 1."""
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "epoch": 5,
                                                  "finalized": {"metadata.version": 29, "kraft.version": 1}}))
    levels = {"kraft.version": (1, 1), "group.version": (1, 1)}
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        assert features(api_versions(wire, 4))[1:] == ({"metadata.version": (29, 29), **levels}, 5)
        assert update(wire, [("metadata.version", 30, 1)], validate_only=True).error_code == 0
        assert features(api_versions(wire, 4))[1]["metadata.version"] == (29, 29)
        assert update(wire, [("metadata.version", 28, SAFE)]).error_code == 0  # 4.2-IV1 changed no metadata
        assert features(api_versions(wire, 4))[1:] == ({"metadata.version": (28, 28), **levels}, 6)
        assert update(wire, [("metadata.version", 30, 1)]).error_code == 0
        _, finalized, epoch = features(api_versions(wire, 4))
        assert finalized["metadata.version"] == (30, 30) and epoch == 7
        # a downgrade to a newer level is refused
        response = update(wire, [("kraft.version", 1, SAFE), ("metadata.version", 31, SAFE)])
        assert response.error_code == INVALID_UPDATE_VERSION
    stored = json.loads((tmp_path / FILE_NAME).read_text())  # written when the update is applied
    assert stored["finalized"] == {"metadata.version": 30, "kraft.version": 1, "group.version": 1}
    assert stored["epoch"] == 7 and stored["version"] == 2
    handle.restart()
    with KafkaWire(handle.bootstrap) as wire:
        assert features(api_versions(wire, 4))[1:] == ({"metadata.version": (30, 30), **levels}, 7)


def describe_quorum(wire: KafkaWire, version: int, topic: str = "__cluster_metadata", partition: int = 0) -> Any:
    cls = request_class(DESCRIBE_QUORUM)[version]
    T = cls.TopicData
    return wire.request(DESCRIBE_QUORUM, version, cls(topics=[T(topic_name=topic, partitions=[
        T.PartitionData(partition_index=partition)])]))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_this_node_is_the_single_voter_and_leader(tidelog_module_broker: BrokerHandle, version: int) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        epoch = features(api_versions(wire, 4))[2]
        response = describe_quorum(wire, version)
    assert response.error_code == 0
    [t] = response.topics
    [p] = t.partitions
    assert (t.topic_name, p.partition_index, p.error_code, p.leader_id, p.leader_epoch) == \
        ("__cluster_metadata", 0, 0, 1, 1)
    assert p.high_watermark == epoch and p.observers == []
    [voter] = p.current_voters
    assert (voter.replica_id, voter.log_end_offset) == (1, epoch)
    if version >= 1:
        assert voter.last_fetch_timestamp > 0 and voter.last_caught_up_timestamp == voter.last_fetch_timestamp
    if version >= 2:
        assert voter.replica_directory_id != uuid.UUID(int=0)
        [node] = response.nodes
        [listener] = node.listeners
        assert (node.node_id, listener.host, listener.port) == (1, tidelog_module_broker.host, tidelog_module_broker.port)


def test_describe_quorum_other_partition_is_unknown(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        response = describe_quorum(wire, 2, "some-topic", 0)
    assert response.error_code == 0
    [p] = response.topics[0].partitions
    assert (p.error_code, p.current_voters) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
