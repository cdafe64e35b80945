"""The listeners a broker binds and the endpoint Metadata advertises for each (Kafka's EndPoint list)."""

from __future__ import annotations

import socket

from tidelog.config.broker_config import BrokerConfig, parse_listeners


class ListenerEndpoints:
    """`listeners` and `advertised.listeners`, per listener name. Kafka answers Metadata with the endpoint of
    the listener the request arrived on, and advertises the canonical host name when the host is empty (all
    interfaces); an advertised port 0 (ephemeral) becomes the bound port once the listener is bound."""

    def __init__(self, config: BrokerConfig) -> None:
        self.listeners: list[tuple[str, str, int]] = parse_listeners(config.listeners)
        advertised = {name: (host, port) for name, host, port in
                      parse_listeners(config.advertised_listeners, "advertised.listeners")}
        self.advertised: dict[str, tuple[str, int]] = {}
        for name, host, port in self.listeners:
            adv_host, adv_port = advertised.get(name, (host, port))
            self.advertised[name] = (adv_host or socket.gethostname(), adv_port)
        self.primary: str = self.listeners[0][0]

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        return self.advertised.get(listener, self.advertised[self.primary])

    def bound(self, listener: str, port: int) -> None:
        """Record the port a listener got; an advertised port 0 becomes that port."""
        host, adv_port = self.advertised[listener]
        if adv_port == 0:
            self.advertised[listener] = (host, port)
