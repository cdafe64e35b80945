"""Classic consumer-group coordinator with offsets persisted in `__consumer_offsets`.

Split as Kafka's group coordinator is (`classic/`, `modern/consumer/`):

* `classic/`: the classic group state machine (`coordinator.py`, Kafka's GroupCoordinator for
  `group.protocol=classic`; parked JoinGroup/SyncGroup calls are futures), its groups and members.
* `consumer/`: KIP-848 consumer groups (`coordinator.py`, `group.py`, `records.py`, `assignors.py`, and
  `classic_members.py` for classic-protocol members of a consumer group), reached as
  `GroupCoordinator.consumer_groups`.
* `metadata_manager.py`: the group cache, writes of offset/group records, replay at startup, offset retention.
* `store.py`: the `__consumer_offsets` topic itself (created through TopicManager.ensure_internal_topic on the
  first FindCoordinator or write; writes go through `Log.append_as_leader(from_client=False)`).
* `group_config.py`: each group's own configs (KIP-848 GroupConfig), set through the config APIs.
* share groups (KIP-932) are `tidelog.coordinator.share`, reached as `GroupCoordinator.share_groups`.
* `records.py`: Kafka's key/value schemas for that topic (written: OffsetCommit key v1 / value v3 or v1,
  GroupMetadata key v2 / value v3; read: every classic version).

This node coordinates every group: the partition a group maps to (`abs(hashCode) % partitions`, as Kafka does)
only decides where its records go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.coordinator.group.classic.coordinator import GroupCoordinator, LeaveMember
from tidelog.coordinator.group.classic.group import GroupMetadata, GroupState, OffsetAndMetadata
from tidelog.coordinator.group.config import GroupCoordinatorConfig
from tidelog.coordinator.group.consumer.coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator
from tidelog.coordinator.group.store import GROUP_METADATA_TOPIC_NAME, TopicOffsetsStore
from tidelog.coordinator.group.streams.coordinator import (
    StreamsGroupConfig,
    StreamsGroupCoordinator,
    StreamsGroupStore,
)
from tidelog.coordinator.share.coordinator import ShareGroupConfig, ShareGroupCoordinator
from tidelog.coordinator.share.state_store import ShareStateStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from tidelog.broker.topics import TopicManager
    from tidelog.clock import Clock
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.coordinator.group.group_config import GroupConfigManager
    from tidelog.storage.fault_hooks import FaultHooks

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


def create_group_coordinator(broker_config: BrokerConfig, clock: Clock, topics: TopicManager,
                             group_configs: Callable[[], GroupConfigManager] | None = None,
                             fault_hooks: FaultHooks | None = None) -> GroupCoordinator:
    """Build the coordinator persisting through `topics` (with its KIP-848 part, `consumer_groups`, which takes
    each group's own session timeout and heartbeat interval from `group_configs()`); call `startup()` once the
    logs are loaded. `fault_hooks`: the broker's, called at the streams-group and share-state files' named write step."""
    config = GroupCoordinatorConfig.from_broker_config(broker_config)
    store = TopicOffsetsStore(topics, config, clock)
    coordinator = GroupCoordinator(clock, config, store)
    coordinator.consumer_groups = ConsumerGroupCoordinator(coordinator, topics, clock,
                                                           ConsumerGroupConfig.from_broker_config(broker_config),
                                                           group_configs)

    def other_group_type(group_id: str) -> str | None:
        """The type of a group of this id the other coordinators have (a share group id is refused then)."""
        if coordinator.consumer_groups.groups.get(group_id) is not None:
            return "consumer"
        streams = coordinator.streams_groups
        if streams is not None and streams.is_streams_group(group_id):
            return "streams"
        return "classic" if group_id in coordinator.groups else None

    def not_streams_type(group_id: str) -> str | None:
        """The type of a live group of this id that is not a streams group (an offsets-only classic group, as a
        streams group's committed offsets are kept, is none)."""
        if coordinator.consumer_groups.groups.get(group_id) is not None:
            return "consumer"
        share = coordinator.share_groups
        if share is not None and share.is_share_group(group_id):
            return "share"
        classic = coordinator.manager.get_group(group_id)
        if classic is not None and (classic.protocol_type or classic.members):
            return "classic"
        return None

    coordinator.share_groups = ShareGroupCoordinator(topics, clock, ShareGroupConfig.from_broker_config(broker_config),
                                                     ShareStateStore(broker_config.log_dirs[0], fault_hooks), group_configs,
                                                     other_group_type)
    coordinator.streams_groups = StreamsGroupCoordinator(
        coordinator, topics, clock, StreamsGroupConfig.from_broker_config(broker_config),
        StreamsGroupStore(broker_config.log_dirs[0], fault_hooks), group_configs, not_streams_type)
    return coordinator
