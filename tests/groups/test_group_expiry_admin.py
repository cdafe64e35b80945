"""A group whose members' sessions have just run out can be deleted at once (Kafka's timing wheel has already
expired them; tidelog's timer may not have fired yet, so admin operations apply due deadlines first)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka import KafkaAdminClient

from tidelog.clock import ManualClock
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

SESSION_MS = 6000


def _join_and_sync(wire: KafkaWire, group: str) -> None:
    protocols = [request_class(11)[5].JoinGroupRequestProtocol(name="range", metadata=b"")]
    join = request_class(11)[5](group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS,
                                member_id="", group_instance_id=None, protocol_type="consumer",
                                protocols=protocols)
    member_id = wire.request(11, 5, join).member_id  # v4+: MEMBER_ID_REQUIRED hands out the id
    join.member_id = member_id
    joined = wire.request(11, 5, join)
    assert joined.error_code == 0, joined
    sync = request_class(14)[3](group_id=group, generation_id=joined.generation_id, member_id=member_id,
                                group_instance_id=None, assignments=[])
    assert wire.request(14, 3, sync).error_code == 0


def _delete(bootstrap: str, group: str) -> Any:
    """kafka-python's admin DeleteGroups: what it reports for `group` ("OK" or the error's name)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.delete_groups([group])
    finally:
        admin.close()
    return dict(result)[group]


def test_group_deleted_exactly_when_its_member_session_runs_out(tidelog_broker_factory: Callable[..., BrokerHandle]) -> None:
    clock = ManualClock()
    broker = tidelog_broker_factory(clock=clock, overrides={"group.initial.rebalance.delay.ms": 0})
    with KafkaWire(broker.bootstrap) as wire:
        _join_and_sync(wire, "expiring")
    clock.advance(SESSION_MS - 1)
    assert _delete(broker.bootstrap, "expiring") == "NonEmptyGroupError"  # one ms of session left
    clock.advance(1)  # the session runs out now; no timer has had a chance to fire on the manual clock
    assert _delete(broker.bootstrap, "expiring") == "OK"
    assert "expiring" not in broker.call(lambda: [g.group_id for g in broker.state.groups.list_groups()])
