"""One module per Kafka API. ApiVersions advertises exactly the modules listed here."""

from __future__ import annotations

# Module names under broker.apis; each defines API_KEY, MIN_VERSION, MAX_VERSION, (ADVERTISED_MIN), handle().
API_MODULES: tuple[str, ...] = (
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "api_versions",
    "create_topics",
    "delete_topics",
    "offset_for_leader_epoch",
    "describe_configs",
    "alter_configs",
    "create_partitions",
    "incremental_alter_configs",
    "describe_cluster",
    "delete_records",
    # group coordinator and idempotent producer
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "list_groups",
    "describe_groups",
    "delete_groups",
    "offset_delete",
    "init_producer_id",
    # security (tidelog/security)
    "sasl_handshake",
    "sasl_authenticate",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
)
