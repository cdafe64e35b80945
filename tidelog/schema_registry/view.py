"""What the registry reads of the running broker: a small interface, so the registry sits beside the console,
below the broker, in the package layers (the broker starts the registry; the registry never imports the broker).
`tidelog.broker.server.Server` satisfies it."""

from __future__ import annotations

from typing import Any, Protocol


class BrokerServer(Protocol):
    config: Any  # BrokerConfig
    security: Any  # BrokerSecurity: .listeners {name: ListenerSecurity}, .scram_store (HTTP Basic auth's users)

    @property
    def broker(self) -> Any: ...  # BrokerState: topics, log_manager, clock
