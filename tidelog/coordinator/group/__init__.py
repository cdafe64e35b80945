"""Classic consumer-group coordinator with offsets persisted in `__consumer_offsets`.

* `coordinator.py`: the group state machine (Kafka's GroupCoordinator, classic protocol only; the KIP-848 APIs
  are not registered, so clients stay on the classic protocol). Parked JoinGroup/SyncGroup calls are futures.
* `metadata_manager.py`: the group cache, writes of offset/group records, replay at startup, offset retention.
* `store.py`: the `__consumer_offsets` topic itself (created through TopicManager.ensure_internal_topic on the
  first FindCoordinator or write; writes go through `Log.append_as_leader(from_client=False)`).
* `records.py`: Kafka's key/value schemas for that topic (written: OffsetCommit key v1 / value v3 or v1,
  GroupMetadata key v2 / value v3; read: every classic version).

This node coordinates every group: the partition a group maps to (`abs(hashCode) % partitions`, as Kafka does)
only decides where its records go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.coordinator.group.config import GroupCoordinatorConfig
from tidelog.coordinator.group.coordinator import GroupCoordinator, LeaveMember
from tidelog.coordinator.group.group import GroupMetadata, GroupState, OffsetAndMetadata
from tidelog.coordinator.group.store import GROUP_METADATA_TOPIC_NAME, TopicOffsetsStore

if TYPE_CHECKING:
    from tidelog.broker.topics import TopicManager
    from tidelog.clock import Clock
    from tidelog.config.broker_config import BrokerConfig

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


def create_group_coordinator(broker_config: BrokerConfig, clock: Clock, topics: TopicManager) -> GroupCoordinator:
    """Build the coordinator persisting through `topics`; call `startup()` once the logs are loaded."""
    config = GroupCoordinatorConfig.from_broker_config(broker_config)
    store = TopicOffsetsStore(topics, config, clock)
    return GroupCoordinator(clock, config, store)
