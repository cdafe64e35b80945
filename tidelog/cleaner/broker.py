"""Wiring of the cleaner into the broker (one call from tidelog/broker/state.py); retention belongs to
LogManager, the cleaner only registers with it."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from tidelog.cleaner import metrics
from tidelog.cleaner.log_cleaner import CleanerConfig, LogCleaner

if TYPE_CHECKING:
    from tidelog.broker.metrics import BrokerMetrics
    from tidelog.broker.topics import TopicManager
    from tidelog.clock import Clock
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

_RECONFIGURABLE = {
    "log.cleaner.threads": "num_threads",
    "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
    "log.cleaner.io.buffer.load.factor": "dedupe_buffer_load_factor",
    "log.cleaner.io.buffer.size": "io_buffer_size",
    "log.cleaner.io.max.bytes.per.second": "max_io_bytes_per_second",
    "log.cleaner.backoff.ms": "backoff_ms",
    "log.cleaner.thread.nice": "thread_nice",
    "message.max.bytes": "max_message_size",
}


def create_log_cleaner(config: BrokerConfig, clock: Clock, log_manager: LogManager, topics: TopicManager,
                       broker_metrics: BrokerMetrics) -> LogCleaner:
    """A LogCleaner over the broker's LogManager, known to its retention task, its metrics registered
    and a config listener that applies dynamic log.cleaner.* changes (topic policy changes need nothing:
    the cleaner reads each log's current config every round)."""
    cleaner = LogCleaner(CleanerConfig.from_broker_config(config), config.log_dirs, log_manager.all_logs,
                         clock, checkpoint_store=log_manager, fault_hooks=log_manager.fault_hooks,
                         has_log=lambda tp: log_manager.get_log(tp) is not None)
    if config.log_cleaner_enable:
        # LogManager's retention task pauses the cleaner on each log it works on (Kafka's cleanupLogs).
        log_manager.retention.cleaner = cleaner
    metrics.register(cleaner, broker_metrics)

    apply_lock = threading.Lock()

    def reconfigure() -> None:
        with apply_lock:  # read and apply together: the last thread to run applies the latest values
            changes = {}
            for name, field in _RECONFIGURABLE.items():
                try:
                    changes[field] = config.get(name)
                except Exception:  # noqa: BLE001 - an unknown name in this config version
                    continue
            try:
                cleaner.reconfigure(**changes)
            except ValueError as e:
                logger.error("Ignoring cleaner reconfiguration: %s", e)

    def on_config_change(topic: str | None) -> None:
        if topic is not None:
            return
        # A restart joins the cleaner threads (up to a pass's chunk, or 60 s): never on the event loop, which
        # calls this listener.
        threading.Thread(target=reconfigure, name="log-cleaner-reconfigure", daemon=True).start()

    topics.add_config_listener(on_config_change)
    return cleaner
