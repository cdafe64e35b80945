"""Feature levels (KIP-584) as a Kafka 4.3 KRaft node reports and changes them.

A Kafka 4 broker lists its supported feature ranges and the cluster's finalized levels in ApiVersions v3+, and
the controller changes finalized levels through UpdateFeatures (Kafka's FeatureControlManager). tidelog is a
single node acting as broker and controller, so this module is both: it supports `metadata.version` (levels
7 = 3.3-IV3 up to 30 = 4.3-IV0, Kafka 4.3's latest production level), `kraft.version` (0-1), `group.version`
(0-1: level 1 serves the KIP-848 consumer protocol), `eligible.leader.replicas.version` (0-1: KIP-966, whose
single-node part is the cluster-level min.insync.replicas, tidelog.broker.elr), `share.version` (0-1: level 1
serves share groups, KIP-932), `streams.version` (0-1: level 1 serves KIP-1071 streams groups; it needs
metadata.version 4.2-IV1) and `transaction.version` (0-2: level 1 writes `__transaction_state` values in the
flexible v1 layout, level 2 adds Produce v12's implicit partition add and the coordinator's per-transaction epoch
bump of KIP-890 part 2, tidelog.coordinator.transaction), all finalized at their latest level as
`kafka-storage format --standalone` leaves a new 4.3 node. A data dir finalized before tidelog knew
transaction.version has no entry for it: level 0 until UpdateFeatures raises it, as after a Kafka upgrade.

The finalized levels and their epoch (Kafka's offset of the last metadata record, here a counter bumped by
every applied update) live in `<first log dir>/tidelog-features.json`, replaced atomically, because Kafka keeps
them in its metadata log.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidelog.metadata.files import FEATURES
from tidelog.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

FILE_NAME = FEATURES.name
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"  # Kafka's GroupVersion: 1 enables the consumer rebalance protocol (KIP-848)
ELR_VERSION = "eligible.leader.replicas.version"  # Kafka's EligibleLeaderReplicasVersion (KIP-966)
SHARE_VERSION = "share.version"  # Kafka's ShareVersion: 1 serves share groups (KIP-932)
STREAMS_VERSION = "streams.version"  # Kafka's StreamsVersion: 1 serves streams groups (KIP-1071)
TRANSACTION_VERSION = "transaction.version"  # Kafka's TransactionVersion: 2 is KIP-890 part 2 (TV2)

# Kafka's MetadataVersion: feature level -> (release-IV, didMetadataChange), from MINIMUM_VERSION (3.3-IV3) to
# Kafka 4.3's latest production level. A downgrade across a level that changed the metadata is refused.
METADATA_VERSIONS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True), 14: ("3.6-IV2", True),
    15: ("3.7-IV0", True), 16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False), 26: ("4.1-IV0", False),
    27: ("4.1-IV1", False), 28: ("4.2-IV0", False), 29: ("4.2-IV1", False), 30: ("4.3-IV0", True),
}
METADATA_VERSION_43 = 30

# name -> (min, max) this node supports (Kafka's BrokerFeatures / QuorumFeatures for the features above).
SUPPORTED: dict[str, tuple[int, int]] = {METADATA_VERSION: (7, METADATA_VERSION_43), KRAFT_VERSION: (0, 1),
                                          GROUP_VERSION: (0, 1), ELR_VERSION: (0, 1), SHARE_VERSION: (0, 1),
                                          STREAMS_VERSION: (0, 1), TRANSACTION_VERSION: (0, 2)}
BOOTSTRAP: dict[str, int] = {METADATA_VERSION: METADATA_VERSION_43, KRAFT_VERSION: 1, GROUP_VERSION: 1,
                             ELR_VERSION: 1, SHARE_VERSION: 1, STREAMS_VERSION: 1, TRANSACTION_VERSION: 2}
# (feature, level) -> the levels of other features it needs (FeatureVersion.dependencies): ELR 1 needs 4.0-IV1,
# streams.version 1 needs 4.2-IV1 (StreamsVersion.SV_1).
DEPENDENCIES: dict[tuple[str, int], dict[str, int]] = {(ELR_VERSION, 1): {METADATA_VERSION: 23},
                                                       (STREAMS_VERSION, 1): {METADATA_VERSION: 29}}
# FeatureUpdate.UpgradeType (UpdateFeatures v1+); v0's allow_downgrade maps to SAFE_DOWNGRADE.
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _saved_levels(document: Any) -> tuple[dict[str, int], int]:
    """(finalized levels, epoch) of a saved `tidelog-features.json` (version 1 files are migrated by
    tidelog.metadata.files)."""
    return {str(k): int(v) for k, v in document["finalized"].items()}, int(document["epoch"])


@dataclass(frozen=True)
class FeatureUpdate:
    """One UpdateFeatures entry: the feature, the level asked for and the upgrade type (KIP-584)."""

    feature: str
    level: int
    upgrade_type: int


class FeatureControl:
    """Supported and finalized feature levels of this node; `update()` applies UpdateFeatures."""

    def __init__(self, log_dir: str | Path, node_id: int = 1) -> None:
        self.log_dir = Path(log_dir)
        self.path = FEATURES.path(log_dir)
        self.node_id = node_id
        self._lock = threading.Lock()
        self.finalized: dict[str, int] = dict(BOOTSTRAP)
        self.epoch = 1
        saved = FEATURES.read(log_dir, _saved_levels)
        if saved is not None:
            self.finalized, self.epoch = saved

    def supported(self) -> dict[str, tuple[int, int]]:
        return dict(SUPPORTED)

    def level(self, feature: str) -> int:
        """The finalized level of `feature` (0 when not finalized, as Kafka's getOrDefault(name, 0))."""
        with self._lock:
            return self.finalized.get(feature, 0)

    def finalized_levels(self) -> tuple[dict[str, int], int]:
        """(finalized levels, epoch). kraft.version is listed only when above 0 (Kafka's KRaftMetadataCache)."""
        with self._lock:
            levels = {k: v for k, v in self.finalized.items() if v > 0 or k == METADATA_VERSION}
            return levels, self.epoch

    def update(self, updates: list[FeatureUpdate], validate_only: bool) -> tuple[ErrorCode, str | None]:
        """All or nothing, as FeatureControlManager.updateFeatures: the first failing update is the answer."""
        with self._lock:
            proposed = dict(self.finalized)
            seen: set[str] = set()
            for u in updates:
                if u.feature in seen:
                    return ErrorCode.INVALID_REQUEST, f"Feature {u.feature} was specified more than once."
                seen.add(u.feature)
                message = self._check(u)
                if message is not None:
                    return ErrorCode.INVALID_UPDATE_VERSION, message
                proposed[u.feature] = u.level
            for u in updates:  # Feature.validateVersion: against the levels the whole request proposes
                for needed, at_least in DEPENDENCIES.get((u.feature, u.level), {}).items():
                    if proposed.get(needed, 0) < at_least:
                        return ErrorCode.INVALID_UPDATE_VERSION, (
                            f"Invalid update version {u.level} for feature {u.feature}. {u.feature} could not be "
                            f"set to {u.level} because it depends on {needed} level {at_least}")
            if validate_only or proposed == self.finalized:
                return ErrorCode.NONE, None
            self.finalized = {k: v for k, v in proposed.items() if v > 0 or k in BOOTSTRAP}
            self.epoch += 1
            self._save()
            log.info("Finalized features now %s (epoch %d)", self.finalized, self.epoch)
            return ErrorCode.NONE, None

    def ensure_saved(self) -> None:
        """Write the bootstrap levels if nothing is stored yet (Kafka writes them when the node is formatted)."""
        with self._lock:
            if not self.path.exists():
                self._save()

    def _check(self, u: FeatureUpdate) -> str | None:
        """None if `u` may be applied, else Kafka's message (FeatureControlManager.updateFeature)."""
        def invalid(reason: str) -> str:
            return f"Invalid update version {u.level} for feature {u.feature}. {reason}"

        if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return invalid("The controller does not support the given upgrade type.")
        current = self.finalized.get(u.feature, 0)
        if u.level < 0:
            return invalid("A feature version cannot be less than 0.")
        low, high = SUPPORTED.get(u.feature, (0, 0))
        if not low <= u.level <= high:
            if high == 0:
                return invalid(f"Local controller {self.node_id} does not support this feature.")
            return invalid(f"Local controller {self.node_id} only supports versions "
                           f"SupportedVersionRange[min_version:{low}, max_version:{high}]")
        if u.level < current and u.upgrade_type == UPGRADE:
            return invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                           "either safe or unsafe downgrade.")
        if u.level > current and u.upgrade_type != UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if u.feature == KRAFT_VERSION and u.upgrade_type != UPGRADE and u.level != current:
            return invalid("Can't downgrade the version of this feature.")
        if u.feature == METADATA_VERSION and u.level < current:
            changed = any(METADATA_VERSIONS[level][1] for level in range(u.level + 1, current + 1))
            if changed:
                reason = ("Unsafe metadata downgrade is not supported in this version."
                          if u.upgrade_type == UNSAFE_DOWNGRADE else
                          "Refusing to perform the requested downgrade because it might delete metadata information.")
                return f"Unsupported metadata.version downgrade from {current} to {u.level}. {reason}"
        return None

    def _save(self) -> None:
        FEATURES.write(self.log_dir, {"finalized": self.finalized, "epoch": self.epoch})
