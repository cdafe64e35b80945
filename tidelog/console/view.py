"""What the console reads of the running broker: a small interface, so the console sits below the broker in the
package layers (the broker starts the console; the console never imports the broker).
`tidelog.broker.server.Server` satisfies it."""

from __future__ import annotations

from typing import Any, Protocol


class BrokerServer(Protocol):
    config: Any  # BrokerConfig
    endpoints: Any  # ListenerEndpoints: .listeners [(name, host, port)]
    security: Any  # BrokerSecurity: .listeners {name: ListenerSecurity}
    features: Any  # FeatureControl: finalized_levels(), supported()
    metrics: Any  # BrokerMetrics: counters, json_routes
    ports: dict[str, int]  # listener name -> bound port
    # the Schema Registry once started (None before, or when off): .subjects(), .subject(name) read its state
    schema_registry: Any

    @property
    def broker(self) -> Any: ...  # BrokerState: cluster_id, log_manager
