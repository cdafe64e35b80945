"""Transaction APIs on the wire (raw requests through KafkaWire): error codes by request version (KIP-588),
unknown partitions, TxnOffsetCommit pending offsets and OffsetFetch require_stable (KIP-447), the transactional
FindCoordinator creating __transaction_state, Describe/ListTransactions and DescribeProducers answers."""

from __future__ import annotations

import pytest

from tidelog.protocol.errors import ErrorCode as E
from tidelog.protocol.messages import request_class
from tidelog.testing import BrokerHandle, KafkaWire

from .wire_lib import add_partitions, end_txn, init

pytestmark = pytest.mark.tidelog(overrides={"transaction.state.log.num.partitions": 4,
                                            "offsets.topic.num.partitions": 2}, topics={"wire-txn": 2})


def test_find_coordinator_for_a_transaction_creates_the_state_topic(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        resp = wire.request(10, 3, request_class(10)[3](key="any-txn", key_type=1))
        assert (resp.error_code, resp.node_id) == (0, tidelog_module_broker.state.node_id)
    info = tidelog_module_broker.call(lambda: tidelog_module_broker.state.topics.get("__transaction_state"))
    assert info is not None and info.partitions == 4 and info.internal


@pytest.mark.parametrize(("version", "fenced"), [(1, E.INVALID_PRODUCER_EPOCH), (2, E.PRODUCER_FENCED),
                                                  (4, E.PRODUCER_FENCED)])
def test_stale_epoch_error_depends_on_version(tidelog_module_broker: BrokerHandle, version: int, fenced: int) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        first = init(wire, f"epoch-{version}")
        second = init(wire, f"epoch-{version}")
        assert second.producer_epoch == first.producer_epoch + 1
        assert end_txn(wire, f"epoch-{version}", first.producer_id, first.producer_epoch, True, version) == fenced
        assert end_txn(wire, f"epoch-{version}", first.producer_id + 1000, second.producer_epoch, True,
                       version) == E.INVALID_PRODUCER_ID_MAPPING
        assert end_txn(wire, f"epoch-{version}", second.producer_id, second.producer_epoch, True,
                       version) == E.INVALID_TXN_STATE  # nothing begun


def test_invalid_timeout_and_unknown_partitions(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        resp = wire.request(22, 4, request_class(22)[4](transactional_id="timeout", transaction_timeout_ms=900_001,
                                                        producer_id=-1, producer_epoch=-1))
        assert resp.error_code == E.INVALID_TRANSACTION_TIMEOUT
        r = init(wire, "unknown-parts")
        got = add_partitions(wire, "unknown-parts", r.producer_id, r.producer_epoch, "wire-txn", [0, 7])
        assert got == {("wire-txn", 0): E.OPERATION_NOT_ATTEMPTED, ("wire-txn", 7): E.UNKNOWN_TOPIC_OR_PARTITION}
        got = add_partitions(wire, "unknown-parts", r.producer_id, r.producer_epoch, "wire-txn", [0, 1])
        assert got == {("wire-txn", 0): E.NONE, ("wire-txn", 1): E.NONE}
        assert end_txn(wire, "unknown-parts", r.producer_id, r.producer_epoch, False) == E.NONE


def test_txn_offsets_pending_until_commit_and_require_stable(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        r = init(wire, "offsets-1")
        assert wire.request(25, 3, request_class(25)[3](
            transactional_id="offsets-1", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
            group_id="wire-group")).error_code == 0
        Req = request_class(28)[3]
        T = Req.TxnOffsetCommitRequestTopic
        resp = wire.request(28, 3, Req(
            transactional_id="offsets-1", group_id="wire-group", producer_id=r.producer_id,
            producer_epoch=r.producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
            topics=[T(name="wire-txn", partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=1, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m")])]))
        assert resp.topics[0].partitions[0].error_code == 0

        def fetch(require_stable: bool) -> tuple[int, int]:
            F = request_class(9)[7]
            out = wire.request(9, 7, F(group_id="wire-group", require_stable=require_stable, topics=[
                F.OffsetFetchRequestTopic(name="wire-txn", partition_indexes=[1])]))
            p = out.topics[0].partitions[0]
            return p.committed_offset, p.error_code

        assert fetch(False) == (-1, 0)  # pending: not visible
        assert fetch(True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        # a commit from a member the group does not know is fenced (KIP-447)
        zombie = wire.request(28, 3, Req(
            transactional_id="offsets-1", group_id="wire-group", producer_id=r.producer_id,
            producer_epoch=r.producer_epoch, generation_id=5, member_id="zombie", group_instance_id=None,
            topics=[T(name="wire-txn", partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=1, committed_offset=50, committed_leader_epoch=-1, committed_metadata="")])]))
        assert zombie.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
        assert end_txn(wire, "offsets-1", r.producer_id, r.producer_epoch, True) == E.NONE
        assert fetch(True) == (42, 0)


def test_describe_and_list_transactions_and_producers(tidelog_module_broker: BrokerHandle) -> None:
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        r = init(wire, "admin-wire")
        assert add_partitions(wire, "admin-wire", r.producer_id, r.producer_epoch, "wire-txn", [1]) == \
            {("wire-txn", 1): 0}
        d = wire.request(65, 0, request_class(65)[0](transactional_ids=["admin-wire", "missing"]))
        found, missing = d.transaction_states
        assert (found.error_code, found.transaction_state, found.producer_id) == (0, "Ongoing", r.producer_id)
        assert [(t.topic, t.partitions) for t in found.topics] == [("wire-txn", [1])]
        assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        L = request_class(66)[2]
        listed = wire.request(66, 2, L(state_filters=["Ongoing"], producer_id_filters=[], duration_filter=-1,
                                       transactional_id_pattern="admin-w.*"))
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == \
            [("admin-wire", "Ongoing")]
        listed = wire.request(66, 0, request_class(66)[0](state_filters=["Bogus"], producer_id_filters=[]))
        assert list(listed.unknown_state_filters) == ["Bogus"] and listed.transaction_states == []
        D = request_class(61)[0]
        producers = wire.request(61, 0, D(topics=[D.TopicRequest(name="wire-txn", partition_indexes=[0, 9])]))
        parts = producers.topics[0].partitions
        assert parts[0].error_code == 0 and parts[1].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert end_txn(wire, "admin-wire", r.producer_id, r.producer_epoch, False) == E.NONE


def test_coordinator_metrics(tidelog_module_broker: BrokerHandle) -> None:
    metrics = tidelog_module_broker.state.metrics
    if metrics.registry is None:
        tidelog_module_broker.call(lambda: metrics.start(-1))
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        r = init(wire, "metrics-1")
        assert add_partitions(wire, "metrics-1", r.producer_id, r.producer_epoch, "wire-txn", [0, 1]) == \
            {("wire-txn", 0): 0, ("wire-txn", 1): 0}
        before = metrics.sample("tidelog_transaction_coordinator_markers_written_total") or 0
        commits = metrics.sample("tidelog_transaction_coordinator_completed_transactions_total", {"result": "commit"})
        assert metrics.sample("tidelog_transaction_coordinator_transactional_ids", {"state": "Ongoing"}) >= 1
        assert end_txn(wire, "metrics-1", r.producer_id, r.producer_epoch, True) == E.NONE
    assert metrics.sample("tidelog_transaction_coordinator_markers_written_total") == before + 2
    assert metrics.sample("tidelog_transaction_coordinator_completed_transactions_total",
                          {"result": "commit"}) == (commits or 0) + 1
    assert metrics.sample("kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize") == 0
    assert metrics.sample("kafka_server_transaction_coordinator_metrics_partition_load_time_max") is not None
