"""The plugin's module-scoped broker (`tidelog_module_broker`): one broker for every test of a module, configured
by the module's marker with the `tidelog_broker_overrides` fixture on top; and the handle's `produce` and
`restart(overrides=...)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tidelog.testing import BrokerHandle

pytestmark = pytest.mark.tidelog(overrides={"num.partitions": 1, "log.retention.hours": 100}, topics={"shared": 2})

PORTS: list[int] = []


@pytest.fixture(scope="module")
def tidelog_broker_overrides() -> dict[str, Any]:
    return {"num.partitions": 3}  # wins over the marker's


@pytest.mark.parametrize("round_", [1, 2])
def test_every_test_of_the_module_gets_the_same_broker(tidelog_module_broker: BrokerHandle, round_: int) -> None:
    PORTS.append(tidelog_module_broker.port)
    assert len(set(PORTS)) == 1 and len(PORTS) == round_
    tidelog_module_broker.produce("shared", [b"r%d" % round_], partition=1)
    assert [r.value for r in tidelog_module_broker.records("shared")] == [b"r%d" % i for i in range(1, round_ + 1)]


def test_marker_and_fixture_overrides_are_merged(tidelog_module_broker: BrokerHandle) -> None:
    from kafka import KafkaProducer

    assert tidelog_module_broker.settings["log.retention.hours"] == "100"
    producer = KafkaProducer(bootstrap_servers=tidelog_module_broker.bootstrap, max_block_ms=60_000)
    try:
        assert producer.partitions_for("auto-created") == {0, 1, 2}  # num.partitions from the fixture
    finally:
        producer.close()


def test_produce_writes_keys_values_and_answers_base_offsets(tidelog_module_broker: BrokerHandle) -> None:
    tidelog_module_broker.create_topic("keyed", 2, configs={"cleanup.policy": "compact"})
    assert tidelog_module_broker.produce("keyed", [(b"k1", b"a"), (b"k2", None)], timestamp=1_000) == 0
    assert tidelog_module_broker.produce("keyed", [(b"k1", b"b")]) == 2
    records = tidelog_module_broker.records("keyed", partition=0)
    assert [(r.offset, r.key, r.value) for r in records] == [(0, b"k1", b"a"), (1, b"k2", None), (2, b"k1", b"b")]
    assert records[0].timestamp == 1_000
    with pytest.raises(AssertionError, match="error 87"):  # INVALID_RECORD: a null key on a compacted topic
        tidelog_module_broker.produce("keyed", [b"no key"])


def test_restart_with_overrides_changes_the_settings(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(overrides={"log.retention.hours": 5}, topics={"kept": 1})
    broker.produce("kept", [b"v"])
    broker.restart(overrides={"log.retention.hours": 7})
    assert broker.settings["log.retention.hours"] == "7"
    assert broker.state.topics.get("kept") is not None and [r.value for r in broker.records("kept")] == [b"v"]
