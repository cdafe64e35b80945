"""Kafka's cleaner metrics on the broker's Prometheus registry (docs/STORAGE.md "Cleaner metrics").

Names follow the JMX exporter convention for `kafka.log:type=LogCleaner,name=...` and
`kafka.log:type=LogCleanerManager,name=...`: lower-cased, non-alphanumerics as `_`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tidelog.cleaner import explain

if TYPE_CHECKING:
    from tidelog.broker.metrics import BrokerMetrics
    from tidelog.cleaner.log_cleaner import LogCleaner

logger = logging.getLogger(__name__)

_CLEANER_METRICS = {
    "max-buffer-utilization-percent": "LogCleaner",
    "cleaner-recopy-percent": "LogCleaner",
    "max-clean-time-secs": "LogCleaner",
    "max-compaction-delay-secs": "LogCleaner",
    "DeadThreadCount": "LogCleaner",
    "max-dirty-percent": "LogCleanerManager",
    "time-since-last-run-ms": "LogCleanerManager",
}


def metric_name(mbean_type: str, name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "_", f"kafka_log_{mbean_type}_{name}").lower()


class LogCleanerCollector:
    """Read at scrape time from the LogCleaner; never raises into the scrape."""

    def __init__(self, cleaner: LogCleaner, snapshots: explain.StatusSnapshots | None = None) -> None:
        self.cleaner = cleaner
        self.snapshots = snapshots or explain.StatusSnapshots(cleaner)

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            values = self.cleaner.metrics()
            uncleanable = self.cleaner.uncleanable_metrics()
        except Exception:  # noqa: BLE001 - a scrape must never take the broker down
            logger.exception("Collecting cleaner metrics failed")
            return
        for name, mbean_type in _CLEANER_METRICS.items():
            gauge = GaugeMetricFamily(metric_name(mbean_type, name), f"kafka.log:type={mbean_type},name={name}")
            gauge.add_metric([], values.get(name, 0))
            yield gauge
        count = GaugeMetricFamily(metric_name("LogCleanerManager", "uncleanable-partitions-count"),
                                  "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count",
                                  labels=["logDirectory"])
        size = GaugeMetricFamily(metric_name("LogCleanerManager", "uncleanable-bytes"),
                                 "kafka.log:type=LogCleanerManager,name=uncleanable-bytes", labels=["logDirectory"])
        for log_dir, (n, nbytes) in uncleanable.items():
            count.add_metric([log_dir], n)
            size.add_metric([log_dir], nbytes)
        yield count
        yield size
        yield from self._per_partition()

    def _per_partition(self) -> Iterator[Any]:
        """Beside Kafka's aggregates: each compacted partition's dirty ratio and what blocks it (one series per
        partition, value 1, the reason as a label), from the same explanation as GET /api/cleaner."""
        from prometheus_client.core import GaugeMetricFamily

        try:
            rows = self.snapshots.rows()
        except Exception:  # noqa: BLE001 - a scrape must never take the broker down
            logger.exception("Explaining the cleaner's decisions failed")
            return
        ratio = GaugeMetricFamily("tidelog_cleaner_dirty_ratio", "Cleanable ratio of a compacted partition "
                                  "(the figure min.cleanable.dirty.ratio gates)", labels=["topic", "partition"])
        blocked = GaugeMetricFamily("tidelog_cleaner_blocked_by", "What holds a compacted partition's cleaning "
                                    "back (1 for its current reason; GET /api/cleaner explains)",
                                    labels=["topic", "partition", "reason"])
        for row in rows:
            ratio.add_metric([row.topic, str(row.partition)], row.dirty_ratio)
            blocked.add_metric([row.topic, str(row.partition), row.blocked_by], 1)
        yield ratio
        yield blocked


def register(cleaner: LogCleaner, broker_metrics: BrokerMetrics) -> None:
    """Add the collector to the broker's registry (now, or when it is created)."""
    snapshots = explain.StatusSnapshots(cleaner)  # shared: a scrape and a request in one interval compute once
    broker_metrics.add_collector(LogCleanerCollector(cleaner, snapshots))
    broker_metrics.add_json_route("/api/cleaner", snapshots.json_body)
