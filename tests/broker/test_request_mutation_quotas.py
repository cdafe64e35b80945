"""The request quota (`request_percentage`, KIP-124, Kafka's ClientRequestQuotaManager) and the controller
mutation quota (`controller_mutation_rate`, KIP-599, Kafka's ControllerMutationQuotaManager): their arithmetic on a
ManualClock, the event-loop time measurement, and both enforced on a real broker for real clients beside
unquota'd ones (the Java Admin's view of the mutation quota is tests/clients/test_java_mutation_quota.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from broker_testlib import batch, produce_request

from tidelog.broker.mutation_quota import THROTTLING_MESSAGE, UNBOUNDED, ControllerMutationQuotaManager
from tidelog.broker.quota_managers import QuotaManagers
from tidelog.broker.quotas import ClientQuotaStore
from tidelog.broker.request_quota import LoopTime, timed
from tidelog.clock import ManualClock
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import request_class, response_class
from tidelog.testing import BrokerHandle, KafkaWire

THROTTLING_QUOTA_EXCEEDED = 89


def _store(quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]]) -> ClientQuotaStore:
    store = ClientQuotaStore.__new__(ClientQuotaStore)
    store.quotas, store.version, store._lock = quotas, 1, threading.Lock()
    return store


# --- arithmetic on a ManualClock --------------------------------------------------------------------------


def test_mutation_token_bucket_strict_and_permissive() -> None:
    """quota 2 partitions/s, 2 samples of 1 s: a burst of 4, full at first. Strict: a mutation is accepted while
    the bucket is not below zero (even one that takes it below), refused while it is; permissive: always
    accepted. Throttle = -tokens / quota * 1000 ms, less the time since it was measured."""
    clock = ManualClock()
    store = _store({(("client-id", "m"),): {"controller_mutation_rate": 2.0}})
    manager = ControllerMutationQuotaManager(store, clock, samples=2, window_s=1)
    strict = manager.new_quota_for("ANONYMOUS", "m", api_version=6, strict_since=6)
    strict.record(3)  # 4 -> 1
    strict.record(3)  # 1 is not below zero: accepted, 1 -> -2
    assert strict.throttle_time() == 0
    with pytest.raises(KafkaError) as refused:
        strict.record(1)
    assert refused.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and refused.value.message == THROTTLING_MESSAGE
    assert strict.throttle_time() == 1000  # 2 tokens short at 2/s
    clock.advance(400)
    assert strict.throttle_time() == 600
    clock.advance(600)  # back at zero tokens: accepted again
    again = manager.new_quota_for("ANONYMOUS", "m", api_version=6, strict_since=6)
    again.record(1)
    assert again.throttle_time() == 0
    # an older version is permissive: accepted and throttled
    permissive = manager.new_quota_for("ANONYMOUS", "m", api_version=5, strict_since=6)
    permissive.record(5)  # -1 -> -6
    assert permissive.throttle_time() == 3000
    # mutation-rate counts what was spent: 3 + 3 + 1 + 5 partitions (the refused one is not) over 1 s
    assert [row[:3] for row in manager.metrics()] == [("", "m", 12.0)]
    # the bucket refills at the quota up to the burst, never beyond
    clock.advance(60_000)
    assert manager.token_rows() == [("", "m", 4.0)]
    # a client-id without a quota is never refused; before any entity has a quota, nothing is tracked at all
    free = manager.new_quota_for("ANONYMOUS", "other", api_version=6, strict_since=6)
    for _ in range(100):
        free.record(100)
    assert free.throttle_time() == 0
    empty = ControllerMutationQuotaManager(_store({}), clock, samples=2, window_s=1)
    assert empty.new_quota_for("ANONYMOUS", "m", 6, 6) is UNBOUNDED


def test_request_time_throttle_and_the_largest_throttle_wins() -> None:
    """request_percentage 10 over 2 samples of 1 s: 50 ms of handler time is 5 % (no throttle), 100 ms more is
    15 %: (15 - 10) / 10 * 1000 ms = 500 ms; a whole second is 115 %, bounded to one window (1000 ms). The
    response carries the largest of the byte-rate and request throttles; a Fetch throttled by either is emptied."""
    clock = ManualClock()
    store = _store({(("client-id", "c"),): {"request_percentage": 10.0, "producer_byte_rate": 1000.0}})
    quotas = QuotaManagers(store, clock, samples=2, window_s=1)
    ms = 1_000_000
    assert quotas.request.quotas_enabled
    assert quotas.request.record_time_and_get_throttle_ms("ANONYMOUS", "c", 50 * ms) == 0
    assert quotas.request.record_time_and_get_throttle_ms("ANONYMOUS", "c", 100 * ms) == 500
    assert quotas.request.record_time_and_get_throttle_ms("ANONYMOUS", "c", 1000 * ms) == 1000
    assert quotas.request.record_time_and_get_throttle_ms("ANONYMOUS", "other", 10_000 * ms) == 0
    clock.advance(10_000)  # every sample has left the window

    produce = response_class(ApiKey.PRODUCE)[9](responses=[], throttle_time_ms=0)
    # 1500 bytes against 1000 B/s: 500 ms; 20 ms of handler time is 2 %: none. The byte rate's throttle applies.
    assert quotas.throttle(ApiKey.PRODUCE, "c", 1500, produce, request_nanos=20 * ms) == 500
    assert produce.throttle_time_ms == 500
    # now the request quota's is larger (115 % -> bounded 1000 ms) and it is the one the response carries
    assert quotas.throttle(ApiKey.PRODUCE, "c", 0, produce, request_nanos=1000 * ms) == 1000
    assert produce.throttle_time_ms == 1000
    assert quotas.request.metrics()[0][3] == 1000.0  # the request quota's throttle-time sensor
    # an acks=0 Produce (no response) is exempt from the request quota, as Kafka's sendNoOpResponseExemptThrottle
    clock.advance(10_000)
    assert quotas.throttle(ApiKey.PRODUCE, "c", 0, None, request_nanos=5000 * ms) == 0
    assert quotas.request.exempt_rate() > 0
    # a Fetch over the request quota is answered empty with its throttle time (and its bytes taken back)
    fetch = response_class(ApiKey.FETCH)[12](throttle_time_ms=0, error_code=0, session_id=0, responses=[
        response_class(ApiKey.FETCH)[12].FetchableTopicResponse(topic="t", partitions=[])])
    assert quotas.throttle(ApiKey.FETCH, "c", 0, fetch, request_nanos=1000 * ms) == 1000
    assert fetch.responses == [] and fetch.throttle_time_ms == 1000
    # any other API is throttled by the request quota alone
    metadata = response_class(ApiKey.METADATA)[12](throttle_time_ms=0, brokers=[], cluster_id=None,
                                                   controller_id=1, topics=[])
    assert quotas.throttle(ApiKey.METADATA, "c", 10, metadata, request_nanos=1000 * ms) == 1000
    assert metadata.throttle_time_ms == 1000


def test_timed_counts_only_the_steps_on_the_event_loop() -> None:
    """A fake nanosecond counter: each step of the handler advances it 7, the time it is suspended 1000. Only the
    steps are counted; results, exceptions and cancellation pass through as with a plain await."""
    now = [0]

    def counter() -> int:
        return now[0]

    async def handler(fail: bool) -> str:
        now[0] += 7
        for _ in range(2):
            await asyncio.sleep(0)
            now[0] += 7
        if fail:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "bad")
        return "answer"

    async def suspended() -> None:
        while True:
            await asyncio.sleep(0)
            now[0] += 1000  # time passing while the handler is suspended

    async def main() -> None:
        ticker = asyncio.ensure_future(suspended())
        spent = LoopTime()
        assert await timed(handler(False), spent, counter) == "answer"
        assert spent.nanos == 21
        failed = LoopTime()
        with pytest.raises(KafkaError):
            await timed(handler(True), failed, counter)
        assert failed.nanos == 21
        stuck = asyncio.ensure_future(timed(asyncio.sleep(3600), LoopTime(), counter))
        await asyncio.sleep(0)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        ticker.cancel()

    asyncio.run(main())


# --- enforced on a real broker ------------------------------------------------------------------------------


# 2 samples of 1 s: the request quota's throttle is at most 1 s, the mutation burst is 2 * quota.
pytestmark = pytest.mark.tidelog(overrides={"quota.window.num": 2, "quota.window.size.seconds": 1})


@pytest.fixture(scope="module")
def quota_broker(tidelog_module_broker: BrokerHandle) -> BrokerHandle:
    """The module's broker with its metrics registry on (the quota sensors report to it)."""
    metrics = tidelog_module_broker.state.metrics
    if metrics.registry is None:
        tidelog_module_broker.call(lambda: metrics.start(-1))
    return tidelog_module_broker


def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    with KafkaWire(bootstrap) as wire:
        wire.alter_client_quota("client-id", client_id, key, value)


def create_topics(wire: KafkaWire, version: int, topics: dict[str, int], validate_only: bool = False) -> Any:
    cls = request_class(ApiKey.CREATE_TOPICS)[version]
    return wire.request(ApiKey.CREATE_TOPICS, version, cls(topics=[
        cls.CreatableTopic(name=name, num_partitions=n, replication_factor=1, assignments=[], configs=[])
        for name, n in topics.items()], timeout_ms=30_000, validate_only=validate_only))


def errors(response: Any) -> dict[str, int]:
    return {t.name: t.error_code for t in response.topics}


def test_mutation_quota_strict_and_permissive_on_the_wire(quota_broker: BrokerHandle) -> None:
    bootstrap = quota_broker.bootstrap
    for client in ("wire-mutator", "old-mutator", "mutator-delete", "mutator-partitions"):
        set_quota(bootstrap, client, "controller_mutation_rate", 1.0)  # burst 2
    topics = quota_broker.state.topics
    # CreateTopics v7 (strict): 1 + 2 partitions pass a bucket of 2, the third topic is refused
    with KafkaWire(bootstrap, client_id="wire-mutator") as wire:
        response = create_topics(wire, 7, {"wm-a": 1, "wm-b": 2, "wm-c": 1})
    assert errors(response) == {"wm-a": 0, "wm-b": 0, "wm-c": THROTTLING_QUOTA_EXCEEDED}
    [refused] = [t for t in response.topics if t.name == "wm-c"]
    assert refused.error_message == THROTTLING_MESSAGE
    assert 0 < response.throttle_time_ms <= 1000
    assert topics.get("wm-b") is not None and topics.get("wm-c") is None
    # CreateTopics v5 (permissive): everything is created, and throttled for the overdraft (2 - 4 = -2: 2 s)
    with KafkaWire(bootstrap, client_id="old-mutator") as wire:
        response = create_topics(wire, 5, {"om-a": 2, "om-b": 2})
    assert errors(response) == {"om-a": 0, "om-b": 0}
    assert 1000 < response.throttle_time_ms <= 2000
    # DeleteTopics v6 (strict): the first deletion (3 partitions) overdraws the bucket, the next is refused
    with KafkaWire(bootstrap) as admin:
        assert errors(create_topics(admin, 7, {"del-a": 3, "del-b": 1})) == {"del-a": 0, "del-b": 0}
    cls = request_class(ApiKey.DELETE_TOPICS)[6]
    with KafkaWire(bootstrap, client_id="mutator-delete") as wire:
        response = wire.request(ApiKey.DELETE_TOPICS, 6, cls(topics=[
            cls.DeleteTopicState(name=name, topic_id=None) for name in ("del-a", "del-b")], timeout_ms=30_000))
    assert {r.name: r.error_code for r in response.responses} == {"del-a": 0, "del-b": THROTTLING_QUOTA_EXCEEDED}
    assert 0 < response.throttle_time_ms <= 1000 and topics.get("del-b") is not None
    # CreatePartitions v3 (strict): 1 -> 4 partitions overdraws, the next topic's growth is refused
    cls = request_class(ApiKey.CREATE_PARTITIONS)[3]
    with KafkaWire(bootstrap) as admin:
        assert errors(create_topics(admin, 7, {"cp-a": 1, "cp-b": 1})) == {"cp-a": 0, "cp-b": 0}
    with KafkaWire(bootstrap, client_id="mutator-partitions") as wire:
        response = wire.request(ApiKey.CREATE_PARTITIONS, 3, cls(topics=[
            cls.CreatePartitionsTopic(name=name, count=4, assignments=None) for name in ("cp-a", "cp-b")],
            timeout_ms=30_000, validate_only=False))
    assert {r.name: r.error_code for r in response.results} == {"cp-a": 0, "cp-b": THROTTLING_QUOTA_EXCEEDED}
    assert 0 < response.throttle_time_ms <= 1000
    assert topics.get("cp-a").partitions == 4 and topics.get("cp-b").partitions == 1  # type: ignore[union-attr]
    # an unquota'd client-id creates 40 partitions at once, unthrottled
    with KafkaWire(bootstrap, client_id="free-mutator") as wire:
        response = create_topics(wire, 7, {f"free-{i}": 4 for i in range(10)})
    assert set(errors(response).values()) == {0} and response.throttle_time_ms == 0
    # Kafka's ControllerMutation sensors on the Prometheus registry
    metrics = quota_broker.state.metrics
    labels = {"user": "", "client_id": "wire-mutator"}
    assert metrics.sample("kafka_server_controllermutation_mutation_rate", labels) > 0
    assert metrics.sample("kafka_server_controllermutation_throttle_time", labels) > 0
    assert metrics.sample("kafka_server_controllermutation_tokens", labels) is not None


BUSY_QUOTA = 0.0001  # percent of the event loop: any request's handling time exceeds it


def test_request_quota_throttle_time_in_every_response(quota_broker: BrokerHandle) -> None:
    """Over its request quota a client-id's responses carry throttle_time_ms (at most one window) whatever the
    API, ApiVersions included (Kafka's KafkaApis throttles it once authenticated); another client-id: 0."""
    bootstrap = quota_broker.bootstrap
    set_quota(bootstrap, "wire-busy", "request_percentage", BUSY_QUOTA)
    metadata = request_class(ApiKey.METADATA)[12](topics=[], allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False)
    versions = request_class(ApiKey.API_VERSIONS)[3](client_software_name="t", client_software_version="1")
    with KafkaWire(bootstrap, client_id="wire-busy") as wire:
        busy = [wire.request(ApiKey.METADATA, 12, metadata).throttle_time_ms,
                wire.request(ApiKey.API_VERSIONS, 3, versions).throttle_time_ms]
    with KafkaWire(bootstrap, client_id="wire-calm") as wire:
        calm = [wire.request(ApiKey.METADATA, 12, metadata).throttle_time_ms,
                wire.request(ApiKey.API_VERSIONS, 3, versions).throttle_time_ms]
    assert all(0 < t <= 1000 for t in busy), busy
    assert calm == [0, 0]


def _produce_for(bootstrap: str, client_id: str, topic: str, seconds: float) -> tuple[int, list[float]]:
    """(messages acknowledged one at a time within `seconds`, throttle times librdkafka reported)."""
    from confluent_kafka import Producer

    throttles: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 0,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    acked = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        producer.produce(topic, b"v")
        producer.flush(30)
        acked += 1
    producer.flush(30)
    producer.poll(0)
    return acked, throttles


@pytest.mark.slow
def test_confluent_producer_is_held_by_its_request_quota_and_its_neighbour_is_not(
        quota_broker: BrokerHandle) -> None:
    bootstrap = quota_broker.bootstrap
    with KafkaWire(bootstrap) as admin:
        assert errors(create_topics(admin, 7, {"rq-busy": 1, "rq-calm": 1})) == {"rq-busy": 0, "rq-calm": 0}
    set_quota(bootstrap, "busy-producer", "request_percentage", BUSY_QUOTA)
    busy_acked, busy_throttles = _produce_for(bootstrap, "busy-producer", "rq-busy", 3.0)
    calm_acked, calm_throttles = _produce_for(bootstrap, "calm-producer", "rq-calm", 3.0)
    # librdkafka saw throttle_time_ms in the broker's responses (KIP-219) and reported it via throttle_cb
    assert busy_throttles and max(busy_throttles) > 0, busy_throttles
    assert not any(calm_throttles), calm_throttles
    # held: each request mutes the connection for up to a second, while the neighbour is served at once
    assert busy_acked * 5 < calm_acked, (busy_acked, calm_acked)
    by_client = {client: throttle for _, client, _, throttle in quota_broker.state.quotas.request.metrics()}
    assert by_client["busy-producer"] > 0 and by_client.get("calm-producer", 0) == 0
    # Kafka's Request sensors on the Prometheus registry
    metrics = quota_broker.state.metrics
    labels = {"user": "", "client_id": "busy-producer"}
    assert metrics.sample("kafka_server_request_request_time", labels) is not None
    assert metrics.sample("kafka_server_request_throttle_time", labels) > 0
    assert metrics.sample("kafka_server_request_exempt_request_time") is not None


def test_acks0_produce_over_the_request_quota_is_exempt(quota_broker: BrokerHandle) -> None:
    """An acks=0 Produce has no response to carry a throttle: Kafka records its time as exempt."""
    bootstrap = quota_broker.bootstrap
    set_quota(bootstrap, "acks0-busy", "request_percentage", BUSY_QUOTA)
    with KafkaWire(bootstrap) as admin:
        assert errors(create_topics(admin, 7, {"rq-acks0": 1})) == {"rq-acks0": 0}
    exempt_before = quota_broker.state.quotas.request.exempt_rate()
    with KafkaWire(bootstrap, client_id="acks0-busy") as wire:
        wire.send(0, 9, produce_request("rq-acks0", 0, batch(1), acks=0))
        # the next request with a response is timed and throttled as usual
        metadata = request_class(ApiKey.METADATA)[12](topics=[], allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False)
        assert wire.request(ApiKey.METADATA, 12, metadata).throttle_time_ms > 0
    assert quota_broker.state.quotas.request.exempt_rate() > exempt_before
