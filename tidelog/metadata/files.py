"""Every metadata file tidelog keeps in its first log dir, with its format version and migrations.

A new file, or a new layout of one, is declared here and nowhere else. To change a layout: bump its
`version`, add the step from the old version to `migrations` (a function of the old document returning
the new one), and keep the decoder in the owning subsystem reading only the current layout; the step is
tested by a broker started on a file in the old layout (tests/metadata/).
"""

from __future__ import annotations

from tidelog.metadata.store import Document, MetadataFile, OnDamage


def _features_v1_to_v2(document: Document) -> Document:
    """Version 1 was written before tidelog knew group.version: that tidelog served KIP-848 groups, so
    group.version 1; eligible.leader.replicas.version and share.version were unknown, so 0 (absent) until
    UpdateFeatures raises them, as after a Kafka upgrade."""
    finalized = dict(document["finalized"])
    finalized.setdefault("group.version", 1)
    return {**document, "finalized": finalized}


# TopicManager (broker/topics.py): topics, ids, partition counts, config overrides, dynamic broker configs.
# Rebuilt from the partition directories when damaged.
TOPICS = MetadataFile("tidelog-topics.json", 1, on_damage=OnDamage.SET_ASIDE)
# ProducerIdManager (broker/producer_ids.py): the end of the last reserved producer id block.
PRODUCER_IDS = MetadataFile("tidelog-producer-ids.json", 1)
# FeatureControl (broker/features.py): finalized feature levels and their epoch. A feature tidelog learns later
# (transaction.version) needs no new layout: absent from an older file it reads as level 0, as an upgraded Kafka
# data dir keeps it until UpdateFeatures raises it (tests/transactions/test_tv2_restart.py).
FEATURES = MetadataFile("tidelog-features.json", 2, migrations={1: _features_v1_to_v2})
# ClientQuotaStore (broker/quotas.py): client quotas by entity.
QUOTAS = MetadataFile("tidelog-quotas.json", 1)
# ClientMetricsManager (broker/client_metrics.py): KIP-714 subscriptions.
CLIENT_METRICS = MetadataFile("tidelog-client-metrics.json", 1)
# GroupConfigManager (coordinator/group/group_config.py): each group's own configs.
GROUP_CONFIGS = MetadataFile("tidelog-group-configs.json", 1)
# ShareStateStore (coordinator/share/state_store.py): share-partition state (Kafka's __share_group_state).
SHARE_STATE = MetadataFile("tidelog-share-state.json", 1, compact=True)
# StreamsGroupStore (coordinator/group/streams/coordinator.py): KIP-1071 streams groups (Kafka's streams-group
# records in __consumer_offsets).
STREAMS_GROUPS = MetadataFile("tidelog-streams-groups.json", 1, compact=True)
# AclStore (security/acl_store.py): ACL bindings.
ACLS = MetadataFile("tidelog-acls.json", 1, private=True)
# ScramCredentialStore (security/scram_store.py): SCRAM salts, StoredKeys and ServerKeys.
SCRAM_CREDENTIALS = MetadataFile("tidelog-scram-credentials.json", 1, private=True)

ALL: tuple[MetadataFile, ...] = (TOPICS, PRODUCER_IDS, FEATURES, QUOTAS, CLIENT_METRICS, GROUP_CONFIGS, SHARE_STATE,
                                 STREAMS_GROUPS, ACLS, SCRAM_CREDENTIALS)
