"""Classic consumer-group coordinator with offsets persisted in `__consumer_offsets`."""

from __future__ import annotations

from broker.groups.config import GroupCoordinatorConfig
from broker.groups.coordinator import GroupCoordinator, LeaveMember
from broker.groups.group import GroupMetadata, GroupState, OffsetAndMetadata
from broker.groups.store import GROUP_METADATA_TOPIC_NAME, TopicOffsetsStore

__all__ = [
    "GROUP_METADATA_TOPIC_NAME",
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupMetadata",
    "GroupState",
    "LeaveMember",
    "OffsetAndMetadata",
    "TopicOffsetsStore",
    "create_group_coordinator",
]


def create_group_coordinator(broker: object) -> GroupCoordinator:
    """Build the coordinator for a BrokerState (uses its clock, config and TopicManager); call `startup()`
    once the logs are loaded."""
    config = GroupCoordinatorConfig.from_broker_config(getattr(broker, "config", None))
    clock = broker.clock  # type: ignore[attr-defined]
    store = TopicOffsetsStore(broker.topics, config, clock)  # type: ignore[attr-defined]
    return GroupCoordinator(clock, config, store)
