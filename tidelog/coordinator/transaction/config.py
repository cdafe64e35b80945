"""Transaction coordinator settings (Kafka's `TransactionConfig` / `transaction.state.log.*` broker configs)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000

    @classmethod
    def from_broker_config(cls, config: Any) -> TransactionConfig:
        """Read Kafka's dotted names through `BrokerConfig.get`; missing ones keep Kafka's defaults."""
        values: dict[str, int] = {}
        getter = getattr(config, "get", None)
        for f in fields(cls):
            if not callable(getter):
                break
            try:
                value = getter(f.name.replace("_", "."))
            except (KeyError, AttributeError):
                value = None
            if value is not None:
                values[f.name] = int(value)
        return cls(**values)
