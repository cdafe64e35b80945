"""KIP-966 (eligible leader replicas) on a single node: the cluster-level min.insync.replicas it relies on.

With one replica per partition there is never an eligible leader replica to elect (DescribeTopicPartitions
lists none), so what ELR changes here is configuration, as Kafka's controller does it while
`eligible.leader.replicas.version` is 1 or more:
  * the cluster-level (default broker resource, name "") `min.insync.replicas` exists: written at the node's
    first start with the static value (ActivationRecordsGenerator), or when the feature is raised
    (ConfigurationControlManager.maybeGenerateElrSafetyRecords, which also removes every broker-level one);
  * AlterConfigs and IncrementalAlterConfigs refuse any change to a broker-level `min.insync.replicas` and the
    removal of the cluster-level one, with INVALID_CONFIG (ConfigurationControlManager.validateAlterConfig).
Topics therefore describe `min.insync.replicas` with source DYNAMIC_DEFAULT_BROKER_CONFIG, as on a new Kafka 4.3
cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from tidelog.broker.features import ELR_VERSION, FeatureControl
from tidelog.broker.topics import TopicManager
from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MIN_ISR = "min.insync.replicas"


class ElrBroker(Protocol):
    """What ELR needs of the broker (BrokerState has it): state.py imports this module, not the reverse."""

    features: FeatureControl
    config: BrokerConfig
    topics: TopicManager


def elr_enabled(broker: ElrBroker) -> bool:
    return broker.features.level(ELR_VERSION) >= 1


def ensure_cluster_min_isr(broker: ElrBroker) -> None:
    """With ELR enabled: the cluster-level min.insync.replicas exists (the static value) and no broker-level one
    does. Kafka writes these records once; here the check runs at every start and after UpdateFeatures, and
    changes nothing when they are already so (ELR forbids every other way of undoing them)."""
    if not elr_enabled(broker):
        return
    config = broker.config
    cluster = config.dynamic_configs(per_broker=False)
    if MIN_ISR not in cluster:
        value = str(config.static_value(MIN_ISR))
        broker.topics.set_broker_configs(False, {**cluster, MIN_ISR: value})
        log.info("Generating cluster-level %s of %s (eligible leader replicas are enabled)", MIN_ISR, value)
    node = config.dynamic_configs(per_broker=True)
    if MIN_ISR in node:
        broker.topics.set_broker_configs(True, {k: v for k, v in node.items() if k != MIN_ISR})
        log.info("Removing broker-level %s for broker %d (eligible leader replicas are enabled)", MIN_ISR,
                 config.node_id)


def check_min_isr_change(broker: ElrBroker, per_broker: bool, named: Iterable[str],
                         new: Mapping[str, str]) -> None:
    """Raise Kafka's INVALID_CONFIG when an AlterConfigs on a BROKER resource would, with ELR enabled, touch a
    broker-level min.insync.replicas (any operation naming it, even one changing nothing: Kafka writes a record
    for every broker config named; none exists to be dropped implicitly, see ensure_cluster_min_isr) or leave
    the cluster level without one. `new` is the resource's whole dynamic set after the change."""
    if not elr_enabled(broker):
        return
    if per_broker:
        if MIN_ISR in named:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Broker-level {MIN_ISR} cannot be altered while ELR is enabled.")
    elif MIN_ISR not in new:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Cluster-level {MIN_ISR} cannot be removed while ELR is enabled.")
