"""group.version and eligible.leader.replicas.version as a new Kafka 4.3 node finalizes them (both at 1), and
what each level changes: KIP-966's cluster-level min.insync.replicas with its AlterConfigs refusals, and the
KIP-848 APIs answering UNSUPPORTED_VERSION at group.version 0. Real sockets; a real client where one sees it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.broker.test_admin_wire import alter, describe, incremental
from tests.broker.test_features import SAFE, api_versions, features, update
from tests.groups.test_consumer_group_wire import heartbeat
from tidelog.broker.features import FILE_NAME
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

BROKER, TOPIC = 4, 2
SET, DELETE = 0, 1
DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5  # DescribeConfigs ConfigSource
ELR, GROUP = "eligible.leader.replicas.version", "group.version"
BROKER_LEVEL = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
CLUSTER_REMOVAL = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."


def min_isr(wire: KafkaWire, rtype: int, name: str) -> tuple[str | None, int] | None:
    """(value, source) of min.insync.replicas on a resource, None when the resource does not list it."""
    entries = {c.name: c for c in describe(wire, 4, rtype, name, keys=["min.insync.replicas"]).configs}
    entry = entries.get("min.insync.replicas")
    return None if entry is None else (entry.value, entry.config_source)


def outcome(result: Any) -> tuple[int, str | None]:
    return result.error_code, result.error_message


def test_new_node_has_a_cluster_level_min_isr_that_topics_inherit(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """The confluent-kafka suite's test_incremental_alter_configs on Kafka 4.1+: min.insync.replicas is a
    non-default entry of every topic, from the cluster level, written with the static value at the first start."""
    handle = tidelog_broker_factory(tmp_path, overrides={"min.insync.replicas": "2"})
    handle.create_topic("elr-topic", 1, configs={"compression.type": "gzip"})
    admin = AdminClient({"bootstrap.servers": handle.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, "elr-topic", incremental_configs=[
        ConfigEntry("retention.ms", "10000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "elr-topic")])
    entries = next(iter(described.values())).result(30)
    non_default = {name: e.value for name, e in entries.items() if not e.is_default}
    assert non_default == {"compression.type": "gzip", "min.insync.replicas": "2", "retention.ms": "10000"}
    assert entries["min.insync.replicas"].source == DYNAMIC_DEFAULT
    with KafkaWire(handle.bootstrap) as wire:
        assert min_isr(wire, BROKER, "") == ("2", DYNAMIC_DEFAULT)
    # written once: a later static value does not replace it (Kafka writes the record at activation only)
    handle.restart(overrides={"min.insync.replicas": "3"})
    with KafkaWire(handle.bootstrap) as wire:
        assert min_isr(wire, BROKER, "") == ("2", DYNAMIC_DEFAULT)
        assert min_isr(wire, TOPIC, "elr-topic") == ("2", DYNAMIC_DEFAULT)


def test_elr_refuses_broker_level_min_isr_and_removing_the_cluster_level_one(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        node = str(handle.state.node_id)
        handle.create_topic("elr-alter")
        for validate_only in (True, False):
            assert outcome(incremental(wire, 1, BROKER, node, [("min.insync.replicas", SET, "2")],
                                       validate_only)) == (ErrorCode.INVALID_CONFIG, BROKER_LEVEL)
            # Kafka writes a record for every broker config named, so even deleting an absent one is refused
            assert outcome(incremental(wire, 1, BROKER, node, [("min.insync.replicas", DELETE, None)],
                                       validate_only)) == (ErrorCode.INVALID_CONFIG, BROKER_LEVEL)
            assert outcome(alter(wire, 2, BROKER, node, {"min.insync.replicas": "2"}, validate_only)) == (
                ErrorCode.INVALID_CONFIG, BROKER_LEVEL)
            assert outcome(incremental(wire, 1, BROKER, "", [("min.insync.replicas", DELETE, None)],
                                       validate_only)) == (ErrorCode.INVALID_CONFIG, CLUSTER_REMOVAL)
            # the legacy API replaces the whole set: leaving min.insync.replicas out removes it
            assert outcome(alter(wire, 2, BROKER, "", {"background.threads": "12"}, validate_only)) == (
                ErrorCode.INVALID_CONFIG, CLUSTER_REMOVAL)
        # a bad value is the broker's own validation first, as ConfigAdminManager does before the controller
        assert incremental(wire, 1, BROKER, node, [("min.insync.replicas", SET, "0")]).error_code == (
            ErrorCode.INVALID_REQUEST)
        assert min_isr(wire, BROKER, "") == ("1", DYNAMIC_DEFAULT)
        # the cluster level itself may change, and topics follow it
        assert outcome(alter(wire, 2, BROKER, "", {"min.insync.replicas": "2", "background.threads": "12"})) == (0, None)
        assert min_isr(wire, TOPIC, "elr-alter") == ("2", DYNAMIC_DEFAULT)
        assert incremental(wire, 1, BROKER, "", [("min.insync.replicas", SET, "3")]).error_code == 0
        assert handle.call(lambda: handle.state.topics.log_config("elr-alter").min_insync_replicas) == 3


def test_elr_off_allows_broker_level_and_raising_it_again_restores_the_rules(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        node = str(handle.state.node_id)
        assert update(wire, [(ELR, 0, SAFE)]).error_code == 0
        assert ELR not in features(api_versions(wire, 4))[1]
        assert incremental(wire, 1, BROKER, node, [("min.insync.replicas", SET, "2")]).error_code == 0
        assert incremental(wire, 1, BROKER, "", [("min.insync.replicas", DELETE, None)]).error_code == 0
        assert min_isr(wire, BROKER, "") is None
        assert min_isr(wire, BROKER, node) == ("2", DYNAMIC_BROKER)
        # maybeGenerateElrSafetyRecords: the cluster level comes back with the static value, the broker level goes
        assert update(wire, [(ELR, 1, 1)]).error_code == 0
        assert min_isr(wire, BROKER, "") == ("1", DYNAMIC_DEFAULT)
        assert min_isr(wire, BROKER, node) == ("1", DYNAMIC_DEFAULT)
        assert outcome(incremental(wire, 1, BROKER, node, [("min.insync.replicas", SET, "2")])) == (
            ErrorCode.INVALID_CONFIG, BROKER_LEVEL)
    handle.restart()
    with KafkaWire(handle.bootstrap) as wire:
        assert features(api_versions(wire, 4))[1][ELR] == (1, 1)
        assert min_isr(wire, BROKER, "") == ("1", DYNAMIC_DEFAULT)


def test_a_data_dir_from_before_elr_keeps_it_off_until_upgraded(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    """An older tidelog had no ELR: its node stays at level 0, like a Kafka cluster upgraded in place, until
    UpdateFeatures raises it; its KIP-848 groups keep working (group.version reads as 1)."""
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "epoch": 3,
                                                  "finalized": {"metadata.version": 30, "kraft.version": 1}}))
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        handle.create_topic("old-dir")
        finalized = features(api_versions(wire, 4))[1]
        assert ELR not in finalized and finalized[GROUP] == (1, 1)
        assert min_isr(wire, BROKER, "") is None
        assert min_isr(wire, TOPIC, "old-dir") == ("1", DEFAULT)
        assert update(wire, [(ELR, 1, 1)]).error_code == 0
        assert min_isr(wire, TOPIC, "old-dir") == ("1", DYNAMIC_DEFAULT)


def test_elr_needs_metadata_version_4_0_iv1(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 2, "epoch": 3, "finalized": {
        "metadata.version": 22, "kraft.version": 1, "group.version": 1}}))
    handle = tidelog_broker_factory(tmp_path)
    with KafkaWire(handle.bootstrap) as wire:
        refused = update(wire, [(ELR, 1, 1)])
        assert outcome(refused) == (ErrorCode.INVALID_UPDATE_VERSION, (
            "Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version "
            "could not be set to 1 because it depends on metadata.version level 23"))
        # Feature.validateVersion checks against what the whole request proposes
        assert update(wire, [("metadata.version", 30, 1), (ELR, 1, 1)]).error_code == 0
        assert min_isr(wire, BROKER, "") == ("1", DYNAMIC_DEFAULT)


def consumer_group_describe(wire: KafkaWire, groups: list[str]) -> Any:
    cls = request_class(69)[0]
    return wire.request(69, 0, cls(group_ids=groups, include_authorized_operations=False))


def test_group_version_0_turns_the_consumer_protocol_off(tmp_path: Path, tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    handle = tidelog_broker_factory(tmp_path, overrides={"group.initial.rebalance.delay.ms": 0})
    with KafkaWire(handle.bootstrap) as wire:
        handle.create_topic("gv-topic", 2)
        joined = heartbeat(wire, "gv-group", topics=["gv-topic"], owned={})
        assert joined.error_code == 0 and joined.member_epoch > 0
        assert update(wire, [(GROUP, 0, SAFE)]).error_code == 0
        assert GROUP not in features(api_versions(wire, 4))[1]
        # KafkaApis checks isConsumerGroupProtocolEnabled before anything else: members, even known ones, and
        # describes get UNSUPPORTED_VERSION (for each group named)
        again = heartbeat(wire, "gv-group", member_id=joined.member_id, epoch=joined.member_epoch)
        assert again.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert heartbeat(wire, "gv-other", topics=["gv-topic"], owned={}).error_code == ErrorCode.UNSUPPORTED_VERSION
        described = consumer_group_describe(wire, ["gv-group", "gv-other"])
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("gv-group", ErrorCode.UNSUPPORTED_VERSION), ("gv-other", ErrorCode.UNSUPPORTED_VERSION)]
        # the APIs stay advertised (Kafka's ApiVersions does not hide them), and the level survives a restart
        assert {k.api_key for k in api_versions(wire, 4).api_keys} >= {68, 69}
    handle.restart()
    with KafkaWire(handle.bootstrap) as wire:
        assert heartbeat(wire, "gv-other", topics=["gv-topic"], owned={}).error_code == ErrorCode.UNSUPPORTED_VERSION
        assert update(wire, [(GROUP, 1, 1)]).error_code == 0
        rejoined = heartbeat(wire, "gv-other", topics=["gv-topic"], owned={})
        assert rejoined.error_code == 0 and rejoined.member_epoch > 0
