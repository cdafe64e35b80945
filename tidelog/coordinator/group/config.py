"""Group coordinator settings (Kafka's `GroupConfig`/`OffsetConfig` broker properties)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2_147_483_647
    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    transaction_max_timeout_ms: int = 900_000

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupCoordinatorConfig:
        """Pick our settings out of a BrokerConfig, whichever way it exposes them: `get("group.max.size")`,
        a mapping, or attributes named with '_' for '.'. Missing ones keep Kafka's defaults."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            dotted = f.name.replace("_", ".")
            value = None
            getter = getattr(config, "get", None)
            if callable(getter):
                try:
                    value = getter(dotted)
                except Exception:  # noqa: BLE001 - an unknown key in someone else's config class
                    value = None
            if value is None:
                value = getattr(config, f.name, None)
            if value is not None:
                values[f.name] = int(value)
        return cls(**values)
