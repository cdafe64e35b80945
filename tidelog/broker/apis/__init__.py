"""One module per Kafka API, listed in `API_TABLE`: ApiVersions advertises exactly these entries.

Each handler module defines `async def handle(ctx: RequestContext, request) -> response | None` (None: no
response, e.g. acks=0 Produce). The versions live here, not in the modules, so ApiVersions can be answered
before any handler is imported (the broker answers it while its logs still load).

docs/APIS.md is generated from this table (`scripts/gen_apis_doc.py`): each module's `NOTES` string (Markdown, one
table cell) is its Notes column, and an entry whose advertised range is not Kafka 4.4's says why in `difference`
(tidelog.broker.kafka_versions.KAFKA_44).
"""

from __future__ import annotations

from typing import NamedTuple

from tidelog.protocol.api_keys import ApiKey


class ApiEntry(NamedTuple):
    key: ApiKey
    module: str  # module name under tidelog.broker.apis
    min_version: int  # lowest version served
    max_version: int  # highest version served
    advertised_min: int | None = None  # what ApiVersions says, when lower than served (Produce: KAFKA-18659)
    difference: str = ""  # why the advertised range is not Kafka 4.4's (docs/APIS.md); "" when it is the same

    @property
    def advertised(self) -> tuple[int, int, int]:
        low = self.min_version if self.advertised_min is None else self.advertised_min
        return int(self.key), low, self.max_version


_OWN_REPORTER = ("Kafka advertises KIP-714's APIs only when a metrics-reporter plugin implements ClientTelemetry; "
                 "tidelog is its own reporter (Prometheus)")


API_TABLE: tuple[ApiEntry, ...] = (
    ApiEntry(ApiKey.PRODUCE, "produce", 3, 13, advertised_min=0),
    ApiEntry(ApiKey.FETCH, "fetch", 4, 18),
    ApiEntry(ApiKey.LIST_OFFSETS, "list_offsets", 1, 11),
    ApiEntry(ApiKey.METADATA, "metadata", 0, 13),
    ApiEntry(ApiKey.API_VERSIONS, "api_versions", 0, 5),  # v5: ClusterId/NodeId checked (KIP-1242)
    ApiEntry(ApiKey.CREATE_TOPICS, "create_topics", 2, 7),
    ApiEntry(ApiKey.DELETE_TOPICS, "delete_topics", 1, 6),
    ApiEntry(ApiKey.OFFSET_FOR_LEADER_EPOCH, "offset_for_leader_epoch", 2, 4),
    ApiEntry(ApiKey.DESCRIBE_CONFIGS, "describe_configs", 1, 4),
    ApiEntry(ApiKey.ALTER_CONFIGS, "alter_configs", 0, 2),
    ApiEntry(ApiKey.CREATE_PARTITIONS, "create_partitions", 0, 3),
    ApiEntry(ApiKey.INCREMENTAL_ALTER_CONFIGS, "incremental_alter_configs", 0, 1),
    ApiEntry(ApiKey.DESCRIBE_CLUSTER, "describe_cluster", 0, 2),
    ApiEntry(ApiKey.DELETE_RECORDS, "delete_records", 0, 2),
    # admin extras tools call (single node: nothing to reassign or elect)
    ApiEntry(ApiKey.ALTER_REPLICA_LOG_DIRS, "alter_replica_log_dirs", 1, 2),
    ApiEntry(ApiKey.DESCRIBE_LOG_DIRS, "describe_log_dirs", 1, 5),
    ApiEntry(ApiKey.LIST_PARTITION_REASSIGNMENTS, "list_partition_reassignments", 0, 0),
    ApiEntry(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "alter_partition_reassignments", 0, 1),
    ApiEntry(ApiKey.ELECT_LEADERS, "elect_leaders", 0, 2),
    ApiEntry(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "describe_topic_partitions", 0, 0),
    # client quotas (tidelog.broker.quotas)
    ApiEntry(ApiKey.DESCRIBE_CLIENT_QUOTAS, "describe_client_quotas", 0, 1),
    ApiEntry(ApiKey.ALTER_CLIENT_QUOTAS, "alter_client_quotas", 0, 1),
    # KRaft features and quorum (this node is the single voter)
    ApiEntry(ApiKey.DESCRIBE_QUORUM, "describe_quorum", 0, 2),
    ApiEntry(ApiKey.UPDATE_FEATURES, "update_features", 0, 2),
    # group coordinator
    ApiEntry(ApiKey.FIND_COORDINATOR, "find_coordinator", 0, 6),
    ApiEntry(ApiKey.JOIN_GROUP, "join_group", 0, 9),
    ApiEntry(ApiKey.SYNC_GROUP, "sync_group", 0, 5),
    ApiEntry(ApiKey.HEARTBEAT, "heartbeat", 0, 4),
    ApiEntry(ApiKey.LEAVE_GROUP, "leave_group", 0, 5),
    ApiEntry(ApiKey.OFFSET_COMMIT, "offset_commit", 2, 10),
    ApiEntry(ApiKey.OFFSET_FETCH, "offset_fetch", 1, 10),
    ApiEntry(ApiKey.LIST_GROUPS, "list_groups", 0, 5),
    ApiEntry(ApiKey.DESCRIBE_GROUPS, "describe_groups", 0, 6),
    ApiEntry(ApiKey.DELETE_GROUPS, "delete_groups", 0, 3),  # v3: a per-group ErrorMessage (KIP-1331)
    ApiEntry(ApiKey.OFFSET_DELETE, "offset_delete", 0, 0),
    # KIP-848 consumer groups; ConsumerGroupHeartbeat v1 adds SubscribedTopicRegex (resolved on the broker)
    ApiEntry(ApiKey.CONSUMER_GROUP_HEARTBEAT, "consumer_group_heartbeat", 0, 1),
    ApiEntry(ApiKey.CONSUMER_GROUP_DESCRIBE, "consumer_group_describe", 0, 1),  # v1: MemberType (KIP-1099)
    # KIP-932 share groups (tidelog.coordinator.share); v0 of 76-79 was 4.0's early access, removed in 4.1
    ApiEntry(ApiKey.SHARE_GROUP_HEARTBEAT, "share_group_heartbeat", 1, 1),
    ApiEntry(ApiKey.SHARE_FETCH, "share_fetch", 1, 2),
    ApiEntry(ApiKey.SHARE_ACKNOWLEDGE, "share_acknowledge", 1, 2),
    ApiEntry(ApiKey.SHARE_GROUP_DESCRIBE, "share_group_describe", 1, 1),
    ApiEntry(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "describe_share_group_offsets", 0, 1),  # v1: Lag
    ApiEntry(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "alter_share_group_offsets", 0, 0),
    ApiEntry(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "delete_share_group_offsets", 0, 0),
    # KIP-1071 streams groups (tidelog.coordinator.group.streams) at Kafka 4.4's versions; 93 is KIP-1331 (4.4)
    ApiEntry(ApiKey.STREAMS_GROUP_HEARTBEAT, "streams_group_heartbeat", 0, 1),
    ApiEntry(ApiKey.STREAMS_GROUP_DESCRIBE, "streams_group_describe", 0, 1),
    ApiEntry(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, "streams_group_topology_description_update", 0, 0),
    # idempotent and transactional producers, transaction coordinator
    ApiEntry(ApiKey.INIT_PRODUCER_ID, "init_producer_id", 0, 5),
    ApiEntry(ApiKey.ADD_PARTITIONS_TO_TXN, "add_partitions_to_txn", 0, 5),  # 4-5: KIP-890 batched/verify form
    ApiEntry(ApiKey.ADD_OFFSETS_TO_TXN, "add_offsets_to_txn", 0, 4),
    ApiEntry(ApiKey.END_TXN, "end_txn", 0, 5),  # v5: transactions v2 (KIP-890 part 2)
    # v5: implicit offsets-partition add (KIP-890 part 2); v6: topics by id (KIP-1319)
    ApiEntry(ApiKey.TXN_OFFSET_COMMIT, "txn_offset_commit", 0, 6),
    ApiEntry(ApiKey.DESCRIBE_PRODUCERS, "describe_producers", 0, 0),
    ApiEntry(ApiKey.DESCRIBE_TRANSACTIONS, "describe_transactions", 0, 0),
    ApiEntry(ApiKey.LIST_TRANSACTIONS, "list_transactions", 0, 2),
    # security (tidelog/security): SASL (KIP-152), ACLs (v0 removed in Kafka 4.0, KIP-896), SCRAM users (KIP-554)
    ApiEntry(ApiKey.SASL_HANDSHAKE, "sasl_handshake", 0, 1),
    ApiEntry(ApiKey.SASL_AUTHENTICATE, "sasl_authenticate", 0, 2),
    ApiEntry(ApiKey.DESCRIBE_ACLS, "describe_acls", 1, 3),
    ApiEntry(ApiKey.CREATE_ACLS, "create_acls", 1, 3),
    ApiEntry(ApiKey.DELETE_ACLS, "delete_acls", 1, 3),
    ApiEntry(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "describe_user_scram_credentials", 0, 0),
    ApiEntry(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "alter_user_scram_credentials", 0, 0),
    # client telemetry (KIP-714, tidelog.broker.client_metrics); 74 v0 was ListClientMetricsResources
    ApiEntry(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, "get_telemetry_subscriptions", 0, 0, difference=_OWN_REPORTER),
    ApiEntry(ApiKey.PUSH_TELEMETRY, "push_telemetry", 0, 0, difference=_OWN_REPORTER),
    ApiEntry(ApiKey.LIST_CONFIG_RESOURCES, "list_config_resources", 0, 1),
)

# Module names of the registered APIs (kept for tools that list them).
API_MODULES: tuple[str, ...] = tuple(entry.module for entry in API_TABLE)
