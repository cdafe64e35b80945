"""TopicManager: the topics of this broker, their ids, partition counts and config overrides.

Kafka keeps this in the KRaft metadata log; tidelog keeps it in `<first log dir>/tidelog-topics.json`
(replaced atomically) and reconciles it at startup with the partition directories LogManager found (their
`partition.metadata` holds the topic id), so a log directory written by Kafka is adopted too.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.config import topic_config
from tidelog.config.definitions import ConfigError
from tidelog.config.log_config import LogConfig
from tidelog.metadata.files import TOPICS
from tidelog.protocol.errors import ErrorCode, KafkaError
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import ZERO_UUID
from tidelog.storage.checkpoints import random_kafka_uuid as random_topic_id
from tidelog.storage.checkpoints import uuid_from_base64 as uuid_from_str
from tidelog.storage.checkpoints import uuid_to_base64 as uuid_to_str

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.storage.log import Log
    from tidelog.storage.log_manager import LogManager

log = logging.getLogger(__name__)

TOPICS_FILE = TOPICS.name
MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
_MAX_REMEMBERED_DELETES = 1000

# fn(topic) after a topic's overrides changed; fn(None) after broker-wide (dynamic broker) configs changed.
ConfigListener = Callable[[str | None], None]


@dataclass
class TopicInfo:
    """A topic as the broker knows it: name, id, partition count, config overrides, internal or not."""

    name: str
    topic_id: bytes
    partitions: int
    overrides: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    @property
    def replication_factor(self) -> int:
        return 1


def validate_topic_name(name: str | None) -> None:
    """org.apache.kafka.common.internals.Topic.validate; raises INVALID_TOPIC_EXCEPTION."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL_NAME.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'",
        )


def unify_collision_chars(name: str) -> str:
    # '.' and '_' map to the same metric name, so Kafka treats names equal after this as colliding.
    return name.replace(".", "_")


def internal_topic_overrides(name: str, broker: BrokerConfig) -> dict[str, str]:
    """The configs Kafka's coordinators give their internal topics."""
    if name == GROUP_METADATA_TOPIC_NAME:
        return {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(broker.offsets_topic_segment_bytes),
        }
    if name == TRANSACTION_STATE_TOPIC_NAME:
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "min.insync.replicas": str(broker.get("transaction.state.log.min.isr")),
            "segment.bytes": str(broker.transaction_state_log_segment_bytes),
            "unclean.leader.election.enable": "false",
        }
    return {}


def _usable_overrides(topic: str, stored: Mapping[str, Any]) -> dict[str, str]:
    """Stored overrides that still validate (a hand-edited file or an older version must not stop startup)."""
    usable: dict[str, str] = {}
    for name, value in stored.items():
        try:
            topic_config.validate_overrides({str(name): str(value)})
        except ConfigError as exc:
            log.error("Ignoring stored config %s=%r of topic %s: %s", name, value, topic, exc)
            continue
        usable[str(name)] = str(value)
    try:
        topic_config.validate_overrides(usable)
    except ConfigError as exc:
        log.error("Ignoring stored config min.compaction.lag.ms of topic %s: %s", topic, exc)
        usable.pop("min.compaction.lag.ms", None)
    return usable


def _stored_topics(document: dict[str, Any]) -> dict[str, Any]:
    """The saved document, if its parts have their types (a malformed topic entry is skipped on its own)."""
    for key, kind in (("topics", dict), ("deleted_topic_ids", list), ("broker_configs", dict)):
        if not isinstance(document.get(key, kind()), kind):
            raise TypeError(f"{key} is a JSON {type(document[key]).__name__}")
    return document


SCHEMA_VALIDATION_CONFIGS = ("confluent.key.schema.validation", "confluent.value.schema.validation")


def _config_error(exc: ConfigError) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, str(exc))


class TopicManager:
    def __init__(self, config: BrokerConfig, log_manager: LogManager) -> None:
        self.config = config
        self.log_manager = log_manager
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[bytes, TopicInfo] = {}
        self._deleted_ids: list[str] = []
        self._listeners: list[ConfigListener] = []
        self._lock = threading.RLock()
        self._dir = Path(config.log_dirs[0])
        self._path = TOPICS.path(self._dir)
        self._loading_configs: dict[str, LogConfig] = {}  # per topic while LogManager.startup() loads
        self._load_stored()
        # Logs found on disk at LogManager.startup() get their topic's config right away (recovery and the
        # cleaner read it), instead of the broker default until startup() reconciles.
        if getattr(log_manager, "config_provider", False) is None:
            log_manager.config_provider = self._config_for_partition

    def _config_for_partition(self, tp: TopicPartition) -> LogConfig:
        # Resolved once per topic, not per partition (LogConfig is frozen; nothing changes before startup()).
        config = self._loading_configs.get(tp.topic)
        if config is None:
            info = self._topics.get(tp.topic)
            config = topic_config.log_config(info.overrides if info else {}, self.config)
            self._loading_configs[tp.topic] = config
        return config

    # --- lookups ---

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: bytes) -> TopicInfo | None:
        return self._by_id.get(bytes(topic_id))

    def names(self) -> list[str]:
        return sorted(self._topics)

    def topics(self) -> list[TopicInfo]:
        return [self._topics[n] for n in sorted(self._topics)]

    def log(self, tp: TopicPartition) -> Log | None:
        info = self._topics.get(tp.topic)
        if info is None or not 0 <= tp.partition < info.partitions:
            return None
        return self.log_manager.get_log(tp)

    def log_config(self, name: str) -> LogConfig:
        info = self._require(name)
        return topic_config.log_config(info.overrides, self.config)

    def add_config_listener(self, fn: ConfigListener) -> None:
        self._listeners.append(fn)

    def _require(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        return info

    # --- startup ---

    def _load_stored(self) -> None:
        with self._lock:
            stored = self._read_file()
            dynamic = stored.get("broker_configs", {})
            for per_broker, key in ((False, "cluster_default"), (True, "broker")):
                values = dynamic.get(key) or {}
                if values:
                    try:
                        self.config.set_dynamic(per_broker, values)
                    except ConfigError as exc:
                        log.warning("Ignoring stored dynamic broker configs %s: %s", values, exc)
            self._deleted_ids = list(stored.get("deleted_topic_ids", []))
            for name, entry in stored.get("topics", {}).items():
                try:
                    info = TopicInfo(
                        name=name,
                        topic_id=uuid_from_str(entry["topic_id"]),
                        partitions=int(entry["partitions"]),
                        overrides=_usable_overrides(name, entry.get("configs", {})),
                        internal=name in INTERNAL_TOPICS,
                    )
                except (KeyError, ValueError, TypeError) as exc:
                    log.error("Skipping malformed topic entry %r in %s: %s", name, self._path, exc)
                    continue
                self._add(info)

    def startup(self) -> None:
        """Reconcile the stored topics with the logs LogManager found (call after LogManager.startup())."""
        with self._lock:
            self._loading_configs.clear()
            changed = self._reconcile_logs()
            if changed or not self._path.exists():
                self._persist()

    def _reconcile_logs(self) -> bool:
        changed = False
        deleted = set(self._deleted_ids)
        for tp, lg in sorted(self.log_manager.all_logs().items()):
            log_id = bytes(getattr(lg, "topic_id", None) or ZERO_UUID)
            if log_id != ZERO_UUID and uuid_to_str(log_id) in deleted:
                # Deleted while the broker was stopping: finish the delete instead of resurrecting it.
                log.info("Removing log %s of deleted topic id %s", tp, uuid_to_str(log_id))
                self.log_manager.delete_log(tp)
                continue
            info = self._topics.get(tp.topic)
            if info is None:
                # A partition dir without a stored topic (crash during create, or a Kafka-written dir).
                info = TopicInfo(tp.topic, log_id if log_id != ZERO_UUID else random_topic_id(), tp.partition + 1,
                                 internal=tp.topic in INTERNAL_TOPICS)
                self._add(info)
                log.info("Adopted topic %s (id %s) from its log directory", tp.topic, uuid_to_str(info.topic_id))
                changed = True
            elif log_id not in (ZERO_UUID, info.topic_id):
                log.error("Log %s has topic id %s but topic %s has id %s; leaving it unused", tp,
                          uuid_to_str(log_id), tp.topic, uuid_to_str(info.topic_id))
                continue
            if tp.partition >= info.partitions:
                info.partitions = tp.partition + 1  # crash during CreatePartitions after the dirs were made
                changed = True
        # Every stored partition has a log, with the topic's effective config.
        for info in list(self._topics.values()):
            config = topic_config.log_config(info.overrides, self.config)
            for p in range(info.partitions):
                tp = TopicPartition(info.name, p)
                existing = self.log_manager.get_log(tp)
                if existing is None:
                    self.log_manager.get_or_create_log(tp, config, info.topic_id)
                elif existing.config != config:
                    existing.update_config(config)
        return changed

    def _add(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    # --- persistence ---

    def _read_file(self) -> dict[str, Any]:
        # A damaged file is set aside and the topics are rebuilt from the log dirs (tidelog.metadata.store).
        return TOPICS.read(self._dir, _stored_topics) or {}

    def _persist(self) -> None:
        data = {
            "topics": {
                info.name: {
                    "topic_id": uuid_to_str(info.topic_id),
                    "partitions": info.partitions,
                    "configs": dict(sorted(info.overrides.items())),
                }
                for info in self.topics()
            },
            "deleted_topic_ids": self._deleted_ids[-_MAX_REMEMBERED_DELETES:],
            "broker_configs": {
                "cluster_default": self.config.dynamic_configs(False),
                "broker": self.config.dynamic_configs(True),
            },
        }
        try:
            TOPICS.write(self._dir, data)
        except OSError as exc:
            # The change is live but not durable; the partition dirs still let startup adopt the topics.
            log.error("Cannot write %s: %s", self._path, exc)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot persist topic metadata: {exc}") from exc

    # --- changes ---

    def check_create(
        self, name: str, num_partitions: int, replication_factor: int, overrides: Mapping[str, str | None]
    ) -> tuple[int, dict[str, str]]:
        """Validate a CreateTopics entry as Kafka does; return (partitions, overrides). Raises KafkaError."""
        validate_topic_name(name)
        if name in self._topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        unified = unify_collision_chars(name)
        for existing in self._topics:
            if unify_collision_chars(existing) == unified:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {existing}"
                )
        partitions = self.config.num_partitions if num_partitions == -1 else num_partitions
        if partitions <= 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
            )
        replication = self.config.default_replication_factor if replication_factor == -1 else replication_factor
        if replication <= 0:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if replication > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                f"{replication} cannot be reached because only 1 broker(s) are registered.",
            )
        self._validate_overrides(overrides)
        return partitions, {k: str(v).strip() for k, v in overrides.items()}

    def _validate_overrides(self, overrides: Mapping[str, str | None]) -> None:
        """Parse and check a topic's overrides; INVALID_CONFIG for a bad one. Schema ID Validation needs the
        Schema Registry on (Confluent Server needs confluent.schema.registry.url for it)."""
        try:
            parsed = topic_config.parse_overrides(overrides)
        except ConfigError as exc:
            raise _config_error(exc) from None
        wanted = [n for n in SCHEMA_VALIDATION_CONFIGS if parsed.get(n)]
        if wanted and int(self.config.get("schema.registry.port")) < 0:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"{wanted[0]} needs the schema registry, which is off (schema.registry.port=-1)")

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        overrides: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        with self._lock:
            partitions, clean = self.check_create(name, num_partitions, replication_factor, overrides or {})
            info = TopicInfo(name, random_topic_id(), partitions, clean, internal=name in INTERNAL_TOPICS)
            if validate_only:
                return info
            config = topic_config.log_config(clean, self.config)
            created: list[TopicPartition] = []
            try:
                for p in range(partitions):
                    tp = TopicPartition(name, p)
                    self.log_manager.get_or_create_log(tp, config, info.topic_id)
                    created.append(tp)
            except Exception as exc:
                log.exception("Creating topic %s failed; removing its %d new logs", name, len(created))
                for tp in created:
                    self.log_manager.delete_log(tp)
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to create topic {name}: {exc}") from exc
            self._add(info)
            self._persist()
            log.info("Created topic %s with %d partition(s), id %s", name, partitions, uuid_to_str(info.topic_id))
            return info

    def ensure_internal_topic(self, name: str, partitions: int) -> TopicInfo:
        """Get or create an internal topic with the configs Kafka's coordinators use."""
        with self._lock:
            info = self._topics.get(name)
            if info is not None:
                return info
            return self.create_topic(name, partitions, 1, internal_topic_overrides(name, self.config))

    def delete_topic(self, name: str) -> TopicInfo:
        with self._lock:
            if not self.config.delete_topic_enable:
                raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            info = self._require(name)
            # Persist first, with the id remembered, so a crash mid-delete finishes the delete at startup.
            del self._topics[name]
            self._by_id.pop(info.topic_id, None)
            self._deleted_ids.append(uuid_to_str(info.topic_id))
            self._persist()
            for p in range(info.partitions):
                tp = TopicPartition(name, p)
                if self.log_manager.get_log(tp) is not None:
                    self.log_manager.delete_log(tp)
            log.info("Deleted topic %s", name)
            return info

    def check_create_partitions(self, name: str, total: int) -> TopicInfo:
        info = self._require(name)
        if total < info.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {info.partitions} partitions, which is higher than the requested {total}.",
            )
        if total == info.partitions:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {info.partitions} partitions.")
        return info

    def create_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicInfo:
        with self._lock:
            info = self.check_create_partitions(name, total)
            if validate_only:
                return info
            config = topic_config.log_config(info.overrides, self.config)
            for p in range(info.partitions, total):
                self.log_manager.get_or_create_log(TopicPartition(name, p), config, info.topic_id)
            info.partitions = total
            self._persist()
            return info

    def check_overrides(self, name: str, overrides: Mapping[str, str | None]) -> TopicInfo:
        info = self._require(name)
        self._validate_overrides(overrides)
        return info

    def set_overrides(self, name: str, overrides: Mapping[str, str]) -> TopicInfo:
        """Replace the topic's whole override set, update its logs and tell the config listeners."""
        with self._lock:
            info = self.check_overrides(name, overrides)
            info.overrides = {k: str(v).strip() for k, v in overrides.items()}
            self._persist()
            self._apply_config(info)
        self._notify(name)
        return info

    def set_broker_configs(self, per_broker: bool, values: Mapping[str, str]) -> None:
        """Replace a dynamic broker config layer (raises config errors), persist, re-resolve every log."""
        with self._lock:
            self.config.set_dynamic(per_broker, values)
            self._persist()
            for info in self._topics.values():
                self._apply_config(info)
        self._notify(None)

    def _apply_config(self, info: TopicInfo) -> None:
        config = topic_config.log_config(info.overrides, self.config)
        for p in range(info.partitions):
            lg = self.log_manager.get_log(TopicPartition(info.name, p))
            if lg is not None:
                lg.update_config(config)

    def _notify(self, topic: str | None) -> None:
        for fn in list(self._listeners):
            try:
                fn(topic)
            except Exception:
                log.exception("Config listener %r failed", fn)
