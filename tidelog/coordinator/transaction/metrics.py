"""Prometheus collector for the transaction coordinator, read at scrape time.

Kafka's own names where it has the metric (JMX name flattened the way the cleaner's are):
`kafka.server:type=transaction-coordinator-metrics,name=partition-load-time-max` and
`kafka.coordinator.transaction:type=TransactionMarkerChannelManager,name=LogAppendRetryQueueSize` (here: the
transactions whose markers wait for a retry). tidelog adds the counts an operator asks for first:
transactional ids per state, markers written, completed and timed-out transactions."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tidelog.coordinator.transaction.metadata import TransactionState

if TYPE_CHECKING:
    from tidelog.broker.metrics import BrokerMetrics
    from tidelog.coordinator.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)


class TransactionCoordinatorCollector:
    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self._coordinator = coordinator

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        # lazy for start-up time: prometheus_client loads only when metrics are served (test_server.py)
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        c = self._coordinator
        states = GaugeMetricFamily("tidelog_transaction_coordinator_transactional_ids",
                                   "Transactional ids known to the coordinator, by transaction state", labels=["state"])
        counts = Counter(m.state for m in list(c.state.transactions.values()))
        for state in TransactionState:
            states.add_metric([state.state_name], counts.get(state, 0))
        yield states
        markers = CounterMetricFamily("tidelog_transaction_coordinator_markers_written",
                                      "COMMIT/ABORT markers appended to partitions")
        markers.add_metric([], c.markers.markers_written)
        yield markers
        done = CounterMetricFamily("tidelog_transaction_coordinator_completed_transactions",
                                   "Transactions completed, by result", labels=["result"])
        done.add_metric(["commit"], c.completed[True])
        done.add_metric(["abort"], c.completed[False])
        yield done
        timed_out = CounterMetricFamily("tidelog_transaction_coordinator_timed_out_aborts",
                                        "Transactions aborted because they exceeded their timeout")
        timed_out.add_metric([], c.aborted_timed_out)
        yield timed_out
        load = GaugeMetricFamily("kafka_server_transaction_coordinator_metrics_partition_load_time_max",
                                 "Milliseconds the last replay of __transaction_state took")
        load.add_metric([], c.state.load_time_ms)
        yield load
        retry = GaugeMetricFamily("kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize",
                                  "Prepared transactions whose markers wait for a retry")
        retry.add_metric([], counts.get(TransactionState.PREPARE_COMMIT, 0) + counts.get(TransactionState.PREPARE_ABORT, 0))
        yield retry


def register_metrics(metrics: BrokerMetrics, coordinator: TransactionCoordinator) -> None:
    metrics.add_collector(TransactionCoordinatorCollector(coordinator))
