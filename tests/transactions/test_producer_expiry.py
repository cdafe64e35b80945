"""producer.id.expiration.ms and producer.id.expiration.check.interval.ms reach the logs (Kafka's
ProducerStateManagerConfig / LogManager's producer-expiration task): the broker used to ignore both and keep
idle producers for a day, so the cleaner kept their last batches and their transactions' markers that long."""

from __future__ import annotations

from collections.abc import Callable

from tidelog.clock import ManualClock
from tidelog.storage import TopicPartition
from tidelog.testing import BrokerHandle, KafkaWire

from .wire_lib import init, produce_records


def test_producer_expiration_configs_are_honoured(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock()
    overrides = {"producer.id.expiration.ms": 5000, "producer.id.expiration.check.interval.ms": 7000}
    b = tidelog_broker_factory(clock=clock, overrides=overrides, topics={"expiry": 1})
    with KafkaWire(b.bootstrap) as wire:
        r = init(wire, None)
        resp = produce_records(wire, "expiry", 0, [(b"k", b"v")], clock.milliseconds(), r.producer_id,
                               r.producer_epoch, 0)
        assert resp.error_code == 0
    log = b.state.log_manager.get_log(TopicPartition("expiry", 0))

    def producers_after(advance_ms: int) -> set[int]:
        clock.advance(advance_ms)
        b.call(b.state.log_manager.run_periodic_tasks)
        return b.call(lambda: set(log.producer_state_manager.producers))

    assert producers_after(0) == {r.producer_id}
    assert producers_after(5000) == {r.producer_id}  # idle long enough, but no check is due yet (7 s)
    assert producers_after(2000) == set()  # the check runs: expired after 5 s
