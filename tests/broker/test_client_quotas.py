"""Client quotas: DescribeClientQuotas / AlterClientQuotas over the raw wire (Kafka's entity and filter rules,
validate_only, durability across a restart), the throttle-time arithmetic of Kafka's ClientQuotaManager on a
ManualClock, and byte-rate enforcement of a real producer and consumer beside an unquota'd client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.broker.quota_managers import QuotaManagers
from tidelog.broker.quotas import ClientQuotaStore
from tidelog.clock import ManualClock
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import request_class, response_class
from tidelog.testing import BrokerHandle, KafkaWire

DESCRIBE, ALTER = 48, 49
EXACT, DEFAULT, ANY = 0, 1, 2


def alter(wire: KafkaWire, changes: list[tuple[dict[str, str | None], dict[str, float | None]]],
          validate_only: bool = False, version: int = 1) -> list[tuple[int, str | None]]:
    cls = request_class(ALTER)[version]
    E = cls.EntryData
    entries = [E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                 ops=[E.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])
               for entity, ops in changes]
    response = wire.request(ALTER, version, cls(entries=entries, validate_only=validate_only))
    return [(e.error_code, e.error_message) for e in response.entries]


def describe(wire: KafkaWire, components: list[tuple[str, int, str | None]], strict: bool = False,
             version: int = 1) -> Any:
    cls = request_class(DESCRIBE)[version]
    return wire.request(DESCRIBE, version, cls(components=[
        cls.ComponentData(entity_type=t, match_type=m, match=s) for t, m, s in components], strict=strict))


def entries(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in response.entries}


ALICE_APP = (("client-id", "app"), ("user", "alice"))
ALICE = (("user", "alice"),)
DEFAULT_CLIENT = (("client-id", None),)
BOB_DEFAULT_CLIENT = (("client-id", None), ("user", "bob"))


def test_alter_and_describe_follow_kafkas_rules(tmp_path: Path,
                                               tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    broker = tidelog_broker_factory(tmp_path)  # its own: the test starts from no quotas and restarts it
    with KafkaWire(broker.bootstrap) as wire:
        changes: list[tuple[dict[str, str | None], dict[str, float | None]]] = [
            ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 1024, "consumer_byte_rate": 2048}),
            ({"user": "alice"}, {"request_percentage": 25.5}),
            ({"client-id": None}, {"controller_mutation_rate": 10}),
            ({"user": "bob", "client-id": None}, {"producer_byte_rate": 4096}),
        ]
        assert alter(wire, changes, validate_only=True) == [(0, None)] * 4
        assert entries(describe(wire, [])) == {}  # validate_only stored nothing
        assert alter(wire, changes) == [(0, None)] * 4
        everything = entries(describe(wire, []))
        assert everything == {ALICE_APP: {"producer_byte_rate": 1024, "consumer_byte_rate": 2048},
                              ALICE: {"request_percentage": 25.5},
                              DEFAULT_CLIENT: {"controller_mutation_rate": 10},
                              BOB_DEFAULT_CLIENT: {"producer_byte_rate": 4096}}
        # exact / default / any matches, strict or not
        assert set(entries(describe(wire, [("user", EXACT, "alice")]))) == {ALICE_APP, ALICE}
        assert set(entries(describe(wire, [("user", EXACT, "alice")], strict=True))) == {ALICE}
        assert set(entries(describe(wire, [("client-id", DEFAULT, None)]))) == {DEFAULT_CLIENT, BOB_DEFAULT_CLIENT}
        assert set(entries(describe(wire, [("client-id", DEFAULT, None)], strict=True))) == {DEFAULT_CLIENT}
        assert set(entries(describe(wire, [("user", ANY, None), ("client-id", ANY, None)]))) == \
            {ALICE_APP, BOB_DEFAULT_CLIENT}
        # removing the last value removes the entity
        assert alter(wire, [({"user": "alice"}, {"request_percentage": None})]) == [(0, None)]
        assert ALICE not in entries(describe(wire, []))
        # bad entries fail alone; the good one beside them is applied
        results = alter(wire, [({"user": "carol"}, {"no_such_quota": 1}),
                               ({"user": "carol"}, {"producer_byte_rate": 1.5}),
                               ({"ip": "10.0.0.1", "user": "carol"}, {"connection_creation_rate": 1}),
                               ({}, {"producer_byte_rate": 1}),
                               ({"user": "dave"}, {"consumer_byte_rate": 512})])
        assert [code for code, _ in results] == [ErrorCode.INVALID_REQUEST] * 4 + [0]
        assert results[0][1] == "Invalid configuration key no_such_quota"
        # bad filters answer an error and null entries
        for components in ([("user", EXACT, None)], [("user", DEFAULT, "x")], [("user", ANY, None), ("user", ANY, None)],
                           [("ip", ANY, None), ("user", ANY, None)]):
            response = describe(wire, components)
            assert response.error_code == ErrorCode.INVALID_REQUEST and response.entries is None
        before = entries(describe(wire, []))
    # durable: a restarted broker describes the same quotas
    broker.restart()
    with KafkaWire(broker.bootstrap) as wire:
        assert entries(describe(wire, [], version=0)) == before
        assert before[(("user", "dave"),)] == {"consumer_byte_rate": 512}


def test_throttle_time_is_kafkas_windowed_rate_formula(tmp_path: Path) -> None:
    """quota 1000 B/s, 2 samples of 1 s: 2000 bytes at once is a rate of 2000/s over the 1 s minimum window, so
    (2000 - 1000) / 1000 * 1000 ms = 1000 ms. 500 ms later the window is 1.5 s: 1333/s, 500 ms. Once the
    first sample is older than 2 windows it is purged and the rate starts over."""
    clock = ManualClock()
    store = ClientQuotaStore(tmp_path)
    store.quotas, store.version = {(("client-id", "c"),): {"producer_byte_rate": 1000.0}}, 1
    quotas = QuotaManagers(store, clock, samples=2, window_s=1)
    response = response_class(ApiKey.PRODUCE)[9](responses=[], throttle_time_ms=0)
    assert quotas.throttle(ApiKey.PRODUCE, "c", 500, response) == 0 and response.throttle_time_ms == 0
    assert quotas.throttle(ApiKey.PRODUCE, "c", 1500, response) == 1000 and response.throttle_time_ms == 1000
    clock.advance(1500)
    assert quotas.throttle(ApiKey.PRODUCE, "c", 0, response) == 500
    # another client id has no quota: never throttled, whatever it sends
    assert quotas.throttle(ApiKey.PRODUCE, "other", 10_000_000, response) == 0
    clock.advance(500)
    assert quotas.throttle(ApiKey.PRODUCE, "c", 900, response) == 0
    # sensors of idle clients are dropped once there are many (Kafka expires inactive sensors)
    for i in range(1100):
        quotas.throttle(ApiKey.PRODUCE, f"many-{i}", 1, response)
    clock.advance(5000)
    quotas.throttle(ApiKey.PRODUCE, "late", 1, response)
    assert len(quotas.produce.metrics()) == 1


QUOTA = 200_000  # bytes per second


# 2 samples of 1 s: the burst a new client gets before its first throttle is one window, not ten.
pytestmark = pytest.mark.tidelog(overrides={"quota.window.num": 2, "quota.window.size.seconds": 1})


def _produce_for(bootstrap: str, client_id: str, topic: str, seconds: float, out: dict[str, Any]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5,
                             batch_size=16_384, acks=1)
    value = b"x" * 1000
    acked: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        futures = [producer.send(topic, value) for _ in range(50)]
        for f in futures:
            f.get(timeout=60)
        acked.append((time.monotonic(), 50 * len(value)))
    out["acked"] = acked
    out["metrics"] = {k: v for group in producer.metrics().values() for k, v in group.items()}
    producer.close()


def _rate(acked: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in acked if start < t <= end) / (end - start)


@pytest.mark.slow
def test_producer_and_consumer_are_held_to_their_byte_rate(tidelog_module_broker: BrokerHandle) -> None:
    bootstrap = tidelog_module_broker.bootstrap
    tidelog_module_broker.create_topic("quota-in")
    tidelog_module_broker.create_topic("quota-free")
    with KafkaWire(bootstrap) as wire:
        assert alter(wire, [({"client-id": "slow-producer"}, {"producer_byte_rate": QUOTA}),
                            ({"client-id": "slow-consumer"}, {"consumer_byte_rate": QUOTA})]) == [(0, None)] * 2
    slow: dict[str, Any] = {}
    free: dict[str, Any] = {}
    threads = [threading.Thread(target=_produce_for, args=(bootstrap, "slow-producer", "quota-in", 6.0, slow)),
               threading.Thread(target=_produce_for, args=(bootstrap, "free-producer", "quota-free", 6.0, free))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    start = slow["acked"][0][0]
    # after the first window's burst, the average over the rest is held near the quota
    measured = _rate(slow["acked"], start + 1.0, slow["acked"][-1][0])
    assert measured < QUOTA * 1.25, measured
    # kafka-python saw the throttle_time_ms in its responses (KIP-219 client-side metric)
    assert slow["metrics"]["throttle-time-max"] > 0 and free["metrics"]["throttle-time-max"] == 0
    metrics = tidelog_module_broker.state.quotas.produce.metrics()
    by_client = {client: (rate, throttle) for _, client, rate, throttle in metrics}
    assert by_client["slow-producer"][1] > 0  # throttled
    assert by_client["free-producer"][1] == 0  # beside it, never throttled

    # consumer: read back what was produced, under its own quota
    from kafka import KafkaConsumer

    consumer = KafkaConsumer("quota-in", bootstrap_servers=bootstrap, client_id="slow-consumer",
                             auto_offset_reset="earliest", max_partition_fetch_bytes=32_768,
                             consumer_timeout_ms=8000)
    received: list[tuple[float, int]] = []
    end = time.monotonic() + 6.0
    for record in consumer:
        received.append((time.monotonic(), len(record.value)))
        if time.monotonic() > end:
            break
    consumer.close()
    assert received
    first = received[0][0]
    measured = _rate(received, first + 1.0, received[-1][0])
    assert measured < QUOTA * 1.25, measured
    fetch = {client: throttle for _, client, _, throttle in tidelog_module_broker.state.quotas.fetch.metrics()}
    assert fetch["slow-consumer"] > 0


def test_throttled_produce_reports_throttle_time_on_the_wire(tidelog_module_broker: BrokerHandle) -> None:
    from broker_testlib import batch, produce_request

    tidelog_module_broker.create_topic("quota-wire")
    with KafkaWire(tidelog_module_broker.bootstrap) as admin:
        assert alter(admin, [({"client-id": "wire-limited"}, {"producer_byte_rate": 10_000})]) == [(0, None)]
    records = batch(40, value=b"v" * 1000)
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="wire-limited") as wire:
        throttles = [wire.request(0, 9, produce_request("quota-wire", 0, records)).throttle_time_ms
                     for _ in range(3)]
    assert throttles[0] > 0, throttles  # 40 kB against 10 kB/s over a 1 s window: over at once
    with KafkaWire(tidelog_module_broker.bootstrap, client_id="wire-unlimited") as wire:
        assert [wire.request(0, 9, produce_request("quota-wire", 0, records)).throttle_time_ms
                for _ in range(3)] == [0, 0, 0]


def test_entity_type_given_twice_with_a_default_name_is_invalid_request(
        tidelog_module_broker: BrokerHandle) -> None:
    """A type repeated with one default (null) name: INVALID_REQUEST, not a handler failure (found by the API
    fuzz: the names of one type do not compare when one is null)."""
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        cls = request_class(ALTER)[1]
        E = cls.EntryData
        entry = E(entity=[E.EntityData(entity_type="user", entity_name=None),
                          E.EntityData(entity_type="user", entity_name="alice")],
                  ops=[E.OpData(key="producer_byte_rate", value=1.0, remove=False)])
        response = wire.request(ALTER, 1, cls(entries=[entry], validate_only=False))
        assert [e.error_code for e in response.entries] == [42]  # INVALID_REQUEST
