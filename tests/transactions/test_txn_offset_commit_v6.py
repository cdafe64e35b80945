"""TxnOffsetCommit v6 (KIP-1319, Kafka 4.4) on the wire: topics named by id in the request and the response, through
a transactions-v2 producer's sequence (InitProducerId v5, Produce v12, TxnOffsetCommit v6 with no AddOffsetsToTxn,
EndTxn v5). Kafka 4.4's KafkaApis.handleTxnOffsetCommitRequest (KAFKA-20444 part 5, apache/kafka PR #22238)
resolves each v6 id to its topic and answers an unknown one UNKNOWN_TOPIC_ID for all its partitions, echoing the
id; below v6 a topic name it does not know is answered UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

import uuid

import pytest

from tests.broker.broker_testlib import topic_id
from tidelog.protocol.errors import ErrorCode as E
from tidelog.testing import BrokerHandle, KafkaWire

from .tv2_lib import (
    committed_offset,
    end_txn_v5,
    init_v5,
    produce_v12,
    txn_offset_commit,
    txn_offset_commit_v6,
)

TOPIC = "txn-v6"

pytestmark = pytest.mark.tidelog(overrides={"transaction.state.log.num.partitions": 2,
                                            "offsets.topic.num.partitions": 2}, topics={TOPIC: 2})


def test_offsets_committed_by_topic_id_are_fetched_after_the_commit(tidelog_module_broker: BrokerHandle) -> None:
    tid, group = "v6-commit", "v6-commit-group"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        tp_id = topic_id(wire, TOPIC)
        p0 = init_v5(wire, tid)
        assert produce_v12(wire, tid, p0, TOPIC, 0, [b"v6-a"]).error_code == E.NONE
        answer = txn_offset_commit_v6(wire, tid, p0, group, [(tp_id, [(0, 41), (1, 7)])])
        assert answer == [(tp_id, {0: E.NONE, 1: E.NONE})]  # the response names the topic by the same id
        # pending until the marker (KIP-447's require_stable)
        assert committed_offset(wire, group, TOPIC, 0) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        error, p1 = end_txn_v5(wire, tid, p0, commit=True)
        assert error == E.NONE and p1.epoch == p0.epoch + 1
        assert committed_offset(wire, group, TOPIC, 0) == (41, E.NONE)
        assert committed_offset(wire, group, TOPIC, 1) == (7, E.NONE)

        # the next transaction, at the bumped epoch, moves the offset again and is aborted: the commit is dropped
        assert txn_offset_commit_v6(wire, tid, p1, group, [(tp_id, [(0, 99)])]) == [(tp_id, {0: E.NONE})]
        assert end_txn_v5(wire, tid, p1, commit=False)[0] == E.NONE
        assert committed_offset(wire, group, TOPIC, 0) == (41, E.NONE)
        # the zombie at the first epoch: the implicit add's PRODUCER_FENCED, as AddPartitionsToTxnManager maps it
        assert txn_offset_commit_v6(wire, tid, p0, group, [(tp_id, [(0, 5)])]) == \
            [(tp_id, {0: E.INVALID_PRODUCER_EPOCH})]


def test_an_unknown_topic_id_fails_only_its_own_partitions(tidelog_module_broker: BrokerHandle) -> None:
    tid, group = "v6-unknown", "v6-unknown-group"
    unknown, zero = uuid.uuid4(), uuid.UUID(int=0)
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        tp_id = topic_id(wire, TOPIC)
        p0 = init_v5(wire, tid)
        answer = txn_offset_commit_v6(wire, tid, p0, group, [
            (unknown, [(0, 3), (5, 4)]), (tp_id, [(1, 12)]), (zero, [(0, 1)])])
        # the all-zero id is echoed too (kafka-python decodes it as None)
        assert answer == [(unknown, {0: E.UNKNOWN_TOPIC_ID, 5: E.UNKNOWN_TOPIC_ID}), (tp_id, {1: E.NONE}),
                          (None, {0: E.UNKNOWN_TOPIC_ID})]
        # a request naming only unknown ids reaches no coordinator and still answers every partition
        assert txn_offset_commit_v6(wire, tid, p0, group, [(unknown, [(2, 8)])]) == \
            [(unknown, {2: E.UNKNOWN_TOPIC_ID})]
        assert end_txn_v5(wire, tid, p0, commit=True)[0] == E.NONE
        assert committed_offset(wire, group, TOPIC, 1) == (12, E.NONE)
        assert committed_offset(wire, group, TOPIC, 0) == (-1, E.NONE)


def test_below_v6_an_unknown_topic_name_is_unknown_topic_or_partition(tidelog_module_broker: BrokerHandle) -> None:
    tid, group = "v5-unknown-name", "v5-unknown-name-group"
    with KafkaWire(tidelog_module_broker.bootstrap) as wire:
        p0 = init_v5(wire, tid)
        assert txn_offset_commit(wire, tid, p0, group, "no-such-topic", 0, 3) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert txn_offset_commit(wire, tid, p0, group, TOPIC, 0, 3) == E.NONE
        assert end_txn_v5(wire, tid, p0, commit=True)[0] == E.NONE
        assert committed_offset(wire, group, TOPIC, 0) == (3, E.NONE)
