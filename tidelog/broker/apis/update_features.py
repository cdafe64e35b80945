"""UpdateFeatures (key 57, KIP-584): change finalized feature levels as Kafka's controller does on a single node
(QuorumController.updateFeatures -> FeatureControlManager; rules in tidelog.broker.features). v1 adds
`validate_only` and `upgrade_type`; v2 drops the per-feature results from the response."""

from __future__ import annotations

from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.broker.elr import ensure_cluster_min_isr
from tidelog.broker.features import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.protocol.messages import response_class

API_KEY = ApiKey.UPDATE_FEATURES
NOTES = """FeatureControlManager's rules on one node: unknown features, levels outside 7–30 / 0–1, downgrades
without a downgrade type, metadata downgrades across a level that changed metadata (30 = 4.3-IV0 did),
kraft.version downgrades, unmet dependencies: INVALID_UPDATE_VERSION; validate_only; group.version 0 turns the
KIP-848 APIs off, eligible.leader.replicas.version 1 writes the cluster-level min.insync.replicas; levels in
`tidelog-features.json`"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    cls = response_class(API_KEY)[v]
    updates = []
    for u in request.feature_updates or []:
        if v >= 1:
            upgrade_type = u.upgrade_type
        else:  # v0: allow_downgrade means a safe downgrade (UpdateFeaturesRequest.upgradeType)
            upgrade_type = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        updates.append(FeatureUpdate(u.feature or "", u.max_version_level, upgrade_type))
    validate_only = bool(request.validate_only) if v >= 1 else False
    error, message = ctx.broker.features.update(updates, validate_only)
    if error == ErrorCode.NONE and not validate_only:
        try:
            ensure_cluster_min_isr(ctx.broker)  # raised to ELR 1: maybeGenerateElrSafetyRecords
        except KafkaError as e:  # the configs could not be stored (KAFKA_STORAGE_ERROR); the levels are applied
            error, message = e.code, e.message
    fields: dict[str, Any] = {"throttle_time_ms": 0, "error_code": error, "error_message": message}
    if v <= 1:
        # UpdateFeaturesResponse.createWithErrors: every feature carries the top-level outcome.
        fields["results"] = [cls.UpdatableFeatureResult(feature=u.feature, error_code=error, error_message=message)
                             for u in updates]
    return cls(**fields)
