"""BrokerState: the composition root. Everything a request handler reaches through `ctx.broker`, built
by `build_broker_state()` with concrete types (see docs/INTERNALS.md, "The composition root").

Building it imports storage, the bulk of start-up's imports: `Server.start` does that on a worker thread while
its listener already answers ApiVersions (Kafka answers ApiVersions before the broker is fully started; clients
probe with it first). The group and transaction coordinators and the cleaner (`BrokerServices`) are built by
`build_services()` and started by `start_services()`, which a `tidelog serve` broker does after it is ready:
until then `state.services` is loading and the coordinator APIs answer COORDINATOR_LOAD_IN_PROGRESS, as
Kafka's coordinators do while they load their partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.broker.elr import ensure_cluster_min_isr
from tidelog.broker.endpoints import ListenerEndpoints
from tidelog.broker.features import FeatureControl
from tidelog.broker.loading import Loading
from tidelog.broker.metrics import BrokerMetrics
from tidelog.broker.producer_ids import ProducerIdManager
from tidelog.broker.purgatory import FetchPurgatory
from tidelog.broker.quota_managers import QuotaManagers, create_quota_managers
from tidelog.broker.registry import ApiRegistry
from tidelog.broker.share_sessions import ShareSessionCache
from tidelog.broker.topics import TopicManager
from tidelog.clock import Clock
from tidelog.config.broker_config import BrokerConfig
from tidelog.metadata import files as metadata_files
from tidelog.security.manager import BrokerSecurity
from tidelog.storage import TopicPartition
from tidelog.storage.checkpoints import random_kafka_uuid, uuid_to_base64
from tidelog.storage.fault_hooks import NO_FAULTS, FaultHooks, FaultPoint
from tidelog.storage.log_manager import LogManager

if TYPE_CHECKING:  # imported by build_services(), after the broker is ready
    from tidelog.broker.client_metrics import ClientMetricsManager
    from tidelog.broker.fetch_session import FetchSessionCache
    from tidelog.broker.schema_validation import SchemaIds
    from tidelog.cleaner.log_cleaner import LogCleaner
    from tidelog.coordinator.group import GroupCoordinator
    from tidelog.coordinator.group.group_config import GroupConfigManager
    from tidelog.coordinator.transaction import TransactionCoordinator

log = logging.getLogger(__name__)



def new_cluster_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 22 chars of URL-safe base64 without padding."""
    return uuid_to_base64(random_kafka_uuid())


@dataclass(eq=False)
class BrokerServices:
    """What the broker loads after it is ready (Metadata, Produce and Fetch do not need it)."""
    groups: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    cleaner: LogCleaner


def _loading_services() -> Loading[BrokerServices]:
    return Loading("group and transaction coordinators")


@dataclass(eq=False)
class BrokerState:
    """The broker's subsystems, typed (the composition root; see the module docstring)."""

    config: BrokerConfig
    clock: Clock
    endpoints: ListenerEndpoints
    metrics: BrokerMetrics
    registry: ApiRegistry
    log_manager: LogManager
    topics: TopicManager
    purgatory: FetchPurgatory
    producer_ids: ProducerIdManager
    features: FeatureControl
    quotas: QuotaManagers
    security: BrokerSecurity  # listeners' TLS/SASL, SCRAM users, ACLs, authorizer
    cluster_id: str = ""
    fault_hooks: FaultHooks = NO_FAULTS  # storage.fault_hooks: tests inject faults at named steps
    # the Schema Registry's ids per subject, once it runs (Schema ID Validation on produce; broker/schema_validation)
    schema_ids: SchemaIds | None = None
    # the coordinators and the cleaner: set by start_services(); until then their getters raise
    # KafkaError(COORDINATOR_LOAD_IN_PROGRESS)
    services: Loading[BrokerServices] = field(default_factory=_loading_services)
    _started: bool = field(default=False, init=False)
    # Fetch sessions (KIP-227) and client metrics (KIP-714) are built by their first request or by
    # start_services(), whichever comes first: their imports (~5 ms) stay off the path to the first Metadata.
    _fetch_sessions: FetchSessionCache | None = field(default=None, init=False)
    _client_metrics: ClientMetricsManager | None = field(default=None, init=False)
    _group_configs: GroupConfigManager | None = field(default=None, init=False)
    _share_sessions: ShareSessionCache | None = field(default=None, init=False)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def listener_name(self) -> str:
        return self.endpoints.primary

    @property
    def advertised_host(self) -> str:
        return self.endpoints.advertised_endpoint(self.endpoints.primary)[0]

    @property
    def advertised_port(self) -> int:
        return self.endpoints.advertised_endpoint(self.endpoints.primary)[1]

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        return self.endpoints.advertised_endpoint(listener)

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        if self._fetch_sessions is None:
            # lazy for start-up time (test_startup_imports)
            from tidelog.broker.fetch_session import create_fetch_session_cache

            self._fetch_sessions = create_fetch_session_cache(self.config, self.clock, self.metrics)
        return self._fetch_sessions

    @property
    def share_sessions_started(self) -> bool:
        return self._share_sessions is not None

    @property
    def share_sessions(self) -> ShareSessionCache:
        """KIP-932 share sessions (built by the first ShareFetch)."""
        if self._share_sessions is None:
            self._share_sessions = ShareSessionCache(int(self.config.get("group.share.max.share.sessions")))
        return self._share_sessions

    @property
    def client_metrics(self) -> ClientMetricsManager:
        """KIP-714 subscriptions and pushed client metrics."""
        if self._client_metrics is None:
            from tidelog.broker.client_metrics import create_client_metrics_manager  # lazy for start-up time

            self._client_metrics = create_client_metrics_manager(self.config, self.clock, self.metrics)
        return self._client_metrics

    @property
    def group_configs(self) -> GroupConfigManager:
        """Each group's own configs (KIP-848 GroupConfig), kept whether or not the group exists."""
        if self._group_configs is None:
            # lazy for start-up time: the coordinators load after ready
            from tidelog.coordinator.group.group_config import create_group_config_manager

            self._group_configs = create_group_config_manager(self.config, Path(self.config.log_dirs[0]))
        return self._group_configs

    @property
    def groups(self) -> GroupCoordinator:
        return self.services.get().groups

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        return self.services.get().txn_coordinator

    @property
    def cleaner(self) -> LogCleaner:
        return self.services.get().cleaner

    # --- lifecycle ---

    def startup(self) -> None:
        """Everything at once, on the loop thread (Server.start runs load_logs() and build_services() on a worker
        thread)."""
        self.load_logs()
        self.start_services(self.build_services())

    def load_logs(self) -> None:
        """Load (recover) every log and reconcile the topics. Touches no event loop."""
        for d in self.config.log_dirs:
            Path(d).mkdir(parents=True, exist_ok=True)
        self.log_manager.startup()
        self._started = True  # from here on shutdown() must close the logs, even if a later step fails
        self.cluster_id = (self.log_manager.meta_properties().get("cluster.id") or self.config.cluster_id
                           or new_cluster_id())
        self.topics.startup()

    def build_services(self) -> BrokerServices:
        """Import and construct the coordinators and the cleaner (touches no event loop and no log)."""
        self.fault_hooks.at(FaultPoint.COORDINATORS_LOAD)
        # lazy for start-up time: imported on this worker thread after ready, built by start_services() on the loop
        import tidelog.broker.client_metrics  # noqa: F401
        import tidelog.broker.fetch_session  # noqa: F401
        import tidelog.coordinator.group.group_config  # noqa: F401
        from tidelog.cleaner.broker import create_log_cleaner
        from tidelog.coordinator.group import create_group_coordinator
        from tidelog.coordinator.transaction import create_transaction_coordinator

        # the coordinator persists to __consumer_offsets through the TopicManager
        groups = create_group_coordinator(self.config, self.clock, self.topics, lambda: self.group_configs,
                                          self.fault_hooks)
        if groups.share_groups is not None:
            groups.share_groups.on_available = self._share_records_available
        txn = create_transaction_coordinator(self, lambda: groups)
        cleaner = create_log_cleaner(self.config, self.clock, self.log_manager, self.topics, self.metrics)
        return BrokerServices(groups, txn, cleaner)

    def _share_records_available(self, topic_id: bytes, partition: int) -> None:
        """Share records of a partition became acquirable: the ShareFetches parked on its log try again now."""
        info = self.topics.by_id(topic_id)
        log_obj = self.topics.log(TopicPartition(info.name, partition)) if info is not None else None
        if log_obj is not None:
            self.purgatory.wake(log_obj)

    def start_services(self, services: BrokerServices) -> None:
        """After load_logs(), on the loop thread (the coordinators arm loop timers): replay __consumer_offsets
        and __transaction_state, start the cleaner threads and resume AlterReplicaLogDirs moves; then the
        coordinator APIs are served."""
        if not self._started:
            return  # shut down while the services were being built
        services.groups.startup()
        services.txn_coordinator.startup()
        services.cleaner.startup()
        self.log_manager.alter_log_dirs.startup()  # resume AlterReplicaLogDirs moves (needs the loop)
        _ = self.fetch_sessions, self.client_metrics, self.group_configs  # built now unless already
        self.services.set(services)

    def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        stops: list[tuple[str, Any]] = []
        services = self.services.get_or_none()
        if services is not None:
            stops += [("transaction coordinator", services.txn_coordinator.shutdown),
                      ("group coordinator", services.groups.shutdown), ("cleaner", services.cleaner.shutdown)]
        stops.append(("fetch purgatory", self.purgatory.shutdown))
        for name, stop in stops:
            try:
                stop()
            except Exception:  # noqa: BLE001 - keep going: the logs must still be closed cleanly
                log.exception("Shutting down the %s failed", name)
        self.log_manager.shutdown()
        self.metrics.stop()

    def log_sizes(self) -> Iterator[tuple[str, int, int]]:
        # Kafka's UnifiedLog.size: the segments' valid bytes, no file system calls per scrape. The lock keeps
        # the segment list still while it is summed (the scrape runs on the metrics HTTP thread).
        for tp, lg in list(self.log_manager.all_logs().items()):
            with lg.lock:
                size = lg.size_in_bytes()
            yield tp.topic, tp.partition, size


def build_broker_state(config: BrokerConfig, clock: Clock | None = None, *,
                       endpoints: ListenerEndpoints | None = None, metrics: BrokerMetrics | None = None,
                       registry: ApiRegistry | None = None, features: FeatureControl | None = None,
                       fault_hooks: FaultHooks | None = None,
                       security: BrokerSecurity | None = None) -> BrokerState:
    """Construct every subsystem but the coordinators and the cleaner (`build_services()`); no log is read yet
    (`load_logs()` does that). Without a `clock` the broker
    runs on the system clock and its housekeeping threads run on their own; a test's clock drives them."""
    own_clock = clock is None
    clock = clock or Clock()
    metrics = metrics or BrokerMetrics()
    hooks = fault_hooks or NO_FAULTS
    log_manager = LogManager(list(config.log_dirs), config.default_log_config(), clock, cluster_id=config.cluster_id,
                             flush_on_append=config.log_flush_on_append, background_tasks=own_clock,
                             producer_id_expiration_ms=config.producer_id_expiration_ms,
                             producer_id_expiration_check_interval_ms=config.producer_id_expiration_check_interval_ms,
                             retention_check_interval_ms=config.log_retention_check_interval_ms,
                             fault_hooks=hooks)
    topics = TopicManager(config, log_manager)
    state = BrokerState(
        config=config,
        clock=clock,
        endpoints=endpoints or ListenerEndpoints(config),
        metrics=metrics,
        registry=registry or ApiRegistry(),
        log_manager=log_manager,
        topics=topics,
        purgatory=FetchPurgatory(clock),
        producer_ids=ProducerIdManager(config.log_dirs[0]),
        features=features or FeatureControl(config.log_dirs[0], config.node_id),
        quotas=create_quota_managers(config, clock, metrics),
        fault_hooks=hooks,
        security=security or BrokerSecurity(config, clock),
    )
    state.features.ensure_saved()
    ensure_cluster_min_isr(state)
    if metadata_files.CLIENT_METRICS.exists(config.log_dirs[0]):
        _ = state.client_metrics  # saved subscriptions are read now: an unreadable file fails start-up, as it did
    if metadata_files.GROUP_CONFIGS.exists(config.log_dirs[0]):
        _ = state.group_configs  # likewise for saved group configs
    metrics.set_log_sizes(state.log_sizes)
    return state
