"""KIP-848 group configs (Kafka's GroupConfig / GroupConfigManager) end to end: set with kafka-python's admin
client and with hand-built IncrementalAlterConfigs / AlterConfigs, shown by DescribeConfigs and ListConfigResources,
checked as Kafka checks them (INVALID_CONFIG / INVALID_REQUEST), acting on the group's KIP-848 members (the
heartbeat interval they are given, the session timeout that expires them on the injected clock) and kept across
a restart."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.groups.test_consumer_group_wire import create_topic, heartbeat, join
from tidelog.clock import ManualClock
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

GROUP, CLIENT_METRICS = 32, 16
SET, DELETE, APPEND = 0, 1, 2
DEFAULT_CONFIG, GROUP_CONFIG = 5, 8
E = ErrorCode


@pytest.fixture
def wire(tidelog_module_broker: BrokerHandle) -> Iterator[KafkaWire]:
    with KafkaWire(tidelog_module_broker.bootstrap) as w:
        yield w


def incremental(wire: KafkaWire, group: str, *ops: tuple[str, int, str | None], validate_only: bool = False) -> Any:
    cls = request_class(44)
    res = cls.AlterConfigsResource
    configs = [res.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops]
    r = wire.request(44, 1, cls[1](resources=[res(resource_type=GROUP, resource_name=group, configs=configs)],
                                   validate_only=validate_only))
    return r.responses[0]


def legacy(wire: KafkaWire, kind: int, name: str, configs: dict[str, str]) -> Any:
    cls = request_class(33)
    res = cls.AlterConfigsResource
    entries = [res.AlterableConfig(name=k, value=v) for k, v in configs.items()]
    r = wire.request(33, 2, cls[2](resources=[res(resource_type=kind, resource_name=name, configs=entries)],
                                   validate_only=False))
    return r.responses[0]


def describe(wire: KafkaWire, group: str, keys: list[str] | None = None, synonyms: bool = False) -> Any:
    cls = request_class(32)
    return wire.request(32, 4, cls[4](resources=[cls.DescribeConfigsResource(
        resource_type=GROUP, resource_name=group, configuration_keys=keys)],
        include_synonyms=synonyms, include_documentation=True)).results[0]


def listed_groups(wire: KafkaWire) -> list[str]:
    r = wire.request(74, 1, request_class(74)[1](resource_types=[GROUP]))
    assert r.error_code == 0
    return [c.resource_name for c in r.config_resources]


def test_kafka_python_sets_describes_and_lists_group_configs(tidelog_module_broker: BrokerHandle, wire: KafkaWire) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=tidelog_module_broker.bootstrap, request_timeout_ms=30000)
    try:
        group = ConfigResource(ConfigResourceType.GROUP, "kp-configured")
        everything = admin.describe_configs([group], config_filter="all")["group"]["kp-configured"]
        assert len(everything) == 13  # every GroupConfig (4.3: with KIP-1240's two), for a group that neither exists nor has configs
        assert everything["consumer.session.timeout.ms"]["value"] == "45000"
        assert everything["consumer.session.timeout.ms"]["config_source"] == "DEFAULT_CONFIG"
        assert everything["share.auto.offset.reset"]["value"] == "latest"
        admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "kp-configured", {
            "consumer.session.timeout.ms": (AlterConfigOp.SET, "50000"),
            "consumer.heartbeat.interval.ms": (AlterConfigOp.SET, "6000")})])
        modified = admin.describe_configs([group])["group"]["kp-configured"]
        assert {k: (v["value"], v["config_source"]) for k, v in modified.items()} == {
            "consumer.session.timeout.ms": ("50000", "DYNAMIC_GROUP_CONFIG"),
            "consumer.heartbeat.interval.ms": ("6000", "DYNAMIC_GROUP_CONFIG")}
        assert admin.list_config_resources(["GROUP"]) == {"group": ["kp-configured"]}
    finally:
        admin.close()
    assert describe(wire, "kp-configured", ["consumer.session.timeout.ms"], synonyms=True).configs[0].synonyms[0].source \
        == GROUP_CONFIG
    assert incremental(wire, "kp-configured", ("consumer.session.timeout.ms", DELETE, None),
                       ("consumer.heartbeat.interval.ms", DELETE, None)).error_code == 0
    assert "kp-configured" not in listed_groups(wire)  # no config of its own left


@pytest.mark.parametrize("ops, code, message", [
    ([("consumer.session.timeout.ms", SET, "30000")], E.INVALID_CONFIG,
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ([("consumer.session.timeout.ms", SET, "61000")], E.INVALID_CONFIG,
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ([("consumer.heartbeat.interval.ms", SET, "16000")], E.INVALID_CONFIG,
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ([("consumer.session.timeout.ms", SET, "soon")], E.INVALID_CONFIG, None),
    ([("no.such.config", SET, "1")], E.INVALID_CONFIG, "Unknown group config name: no.such.config"),
    ([("share.record.lock.duration.ms", SET, "999")], E.INVALID_CONFIG, None),  # atLeast(1000)
    ([("share.auto.offset.reset", SET, "by_duration:-PT1H")], E.INVALID_CONFIG, None),
    ([("share.isolation.level", SET, "read_dirty")], E.INVALID_CONFIG, None),
    ([("share.delivery.count.limit", SET, "11")], E.INVALID_CONFIG, None),  # group.share.max.delivery.count.limit
    ([("share.partition.max.record.locks", SET, "99")], E.INVALID_CONFIG, None),  # atLeast(100)
    ([("streams.num.standby.replicas", SET, "3")], E.INVALID_CONFIG,
     "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
    ([("consumer.session.timeout.ms", APPEND, "1")], E.INVALID_CONFIG, None),  # not a list config
])
def test_refused_group_configs(wire: KafkaWire, ops: list[tuple[str, int, str]], code: int,
                               message: str | None) -> None:
    result = incremental(wire, "refused", *ops)
    assert result.error_code == code, result
    if message is not None:
        assert result.error_message == message
    assert describe(wire, "refused").configs[0].config_source == DEFAULT_CONFIG  # nothing was kept
    assert "refused" not in listed_groups(wire)


def test_bounds_follow_the_broker_and_session_must_exceed_heartbeat(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    bounds = {"group.consumer.min.session.timeout.ms": "1000", "group.consumer.max.heartbeat.interval.ms": "30000"}
    b = tidelog_broker_factory(overrides=bounds)
    with KafkaWire(b.bootstrap) as w:
        assert incremental(w, "fast", ("consumer.session.timeout.ms", SET, "2000"),
                           ("consumer.heartbeat.interval.ms", SET, "1000")).error_code == E.INVALID_CONFIG  # min 5000
        pair = incremental(w, "fast", ("consumer.session.timeout.ms", SET, "20000"),
                           ("consumer.heartbeat.interval.ms", SET, "20000"))
        assert (pair.error_code, pair.error_message) == (
            E.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
        assert incremental(w, "fast", ("consumer.session.timeout.ms", SET, "20000"),
                           ("consumer.heartbeat.interval.ms", SET, "19000")).error_code == 0


def test_accepted_values_validate_only_empty_name_and_legacy_alter(wire: KafkaWire) -> None:
    ok = incremental(wire, "shared-g", ("share.auto.offset.reset", SET, "by_duration:P1DT2H"),
                     ("share.isolation.level", SET, "read_committed"), ("streams.num.standby.replicas", SET, "2"))
    assert ok.error_code == 0, ok
    values = {c.name: (c.value, c.config_source) for c in describe(wire, "shared-g").configs}
    assert values["share.auto.offset.reset"] == ("by_duration:P1DT2H", GROUP_CONFIG)
    assert values["share.isolation.level"] == ("read_committed", GROUP_CONFIG)
    assert values["consumer.heartbeat.interval.ms"] == ("5000", DEFAULT_CONFIG)

    assert incremental(wire, "dry", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True).error_code == 0
    assert "dry" not in listed_groups(wire)
    empty = incremental(wire, "", ("consumer.session.timeout.ms", SET, "50000"))
    assert (empty.error_code, empty.error_message) == (E.INVALID_REQUEST, "Default group resources are not allowed.")
    assert describe(wire, "").error_code == E.INVALID_REQUEST

    # the legacy AlterConfigs replaces the whole set, for groups and client-metrics subscriptions alike
    assert legacy(wire, GROUP, "shared-g", {"consumer.session.timeout.ms": "55000"}).error_code == 0
    own = {c.name for c in describe(wire, "shared-g").configs if c.config_source == GROUP_CONFIG}
    assert own == {"consumer.session.timeout.ms"}
    assert legacy(wire, GROUP, "shared-g", {"consumer.session.timeout.ms": "1"}).error_code == E.INVALID_CONFIG
    assert legacy(wire, CLIENT_METRICS, "legacy-sub", {"interval.ms": "1000"}).error_code == 0
    cls = request_class(32)
    sub = wire.request(32, 4, cls[4](resources=[cls.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name="legacy-sub", configuration_keys=["interval.ms"])],
        include_synonyms=False, include_documentation=False)).results[0].configs[0]
    assert (sub.value, sub.config_source) == ("1000", 7)


def test_group_configs_act_on_members_and_survive_a_restart(tmp_path: Path,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock()
    overrides = {"group.initial.rebalance.delay.ms": 0}
    b = tidelog_broker_factory(log_dir=tmp_path, clock=clock, overrides=overrides)
    with KafkaWire(b.bootstrap) as w:
        create_topic(w, "cfg", 2)
        assert incremental(w, "tuned", ("consumer.session.timeout.ms", SET, "50000"),
                           ("consumer.heartbeat.interval.ms", SET, "7000")).error_code == 0
        a = join(w, "tuned", ["cfg"])
        assert a.heartbeat_interval_ms == 7000
        assert join(w, "plain", ["cfg"]).heartbeat_interval_ms == 5000  # the broker's default
        cg = b.state.groups.consumer_groups
        clock.advance(47_000)  # past the broker's 45 s, within the group's 50 s
        b.call(cg.check_expirations)
        assert b.call(lambda: list(cg.groups["tuned"].members)) == [a.member_id]
        assert b.call(lambda: list(cg.groups["plain"].members)) == []
        clock.advance(4_000)  # 51 s without a heartbeat
        b.call(cg.check_expirations)
        assert b.call(lambda: list(cg.groups["tuned"].members)) == []
    b.restart()
    with KafkaWire(b.bootstrap) as w:
        assert listed_groups(w) == ["tuned"]
        assert heartbeat(w, "tuned", epoch=0, topics=["cfg"], owned={}).heartbeat_interval_ms == 7000


def test_a_hand_edited_group_configs_file_loses_only_its_broken_group(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture,
        tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    import json

    (tmp_path / "tidelog-group-configs.json").write_text(json.dumps({"version": 1, "groups": {
        "kept": {"consumer.session.timeout.ms": "50000"},
        "broken": {"consumer.session.timeout.ms": "often"}}}))
    b = tidelog_broker_factory(log_dir=tmp_path)
    with KafkaWire(b.bootstrap) as w:
        assert listed_groups(w) == ["kept"]
        assert describe(w, "broken", ["consumer.session.timeout.ms"]).configs[0].value == "45000"
    assert any("ignoring the configs of group broken" in r.getMessage() for r in caplog.records)
