"""Per-listener security settings, resolved the way Kafka's ListenerName.configPrefix does: a
`listener.name.<listener lower-case>.<config>` value wins over the broker-wide `<config>`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.config.broker_config import LISTENER_PREFIX
from tidelog.config.broker_defs import BROKER_CONFIG_DEFS
from tidelog.config.definitions import ConfigError

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.security.jaas import JaasEntry

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def security_protocol_map(config: BrokerConfig) -> dict[str, str]:
    """listener.security.protocol.map: `NAME:PROTOCOL,...` (names upper-case, as Kafka's ListenerName)."""
    mapping: dict[str, str] = {}
    for item in str(config.get("listener.security.protocol.map") or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid listener.security.protocol.map entry {item!r}")
        mapping[name.strip().upper()] = protocol
    return mapping


def listener_value(config: BrokerConfig, listener: str, name: str) -> Any:
    """The effective value of broker config `name` for `listener` (override first, parsed by its definition)."""
    overrides: dict[str, str] = getattr(config, "listener_overrides", {})
    raw = overrides.get(f"{LISTENER_PREFIX}{listener.lower()}.{name}")
    definition = BROKER_CONFIG_DEFS.get(name)
    if raw is not None:
        return definition.parse(raw) if definition is not None else raw
    return config.get(name) if definition is not None else None


@dataclass(frozen=True)
class ListenerSecurity:
    """One listener's security: protocol, SASL mechanisms and their login modules, re-authentication and the
    delay before a failed authentication is answered."""

    name: str
    protocol: str
    mechanisms: tuple[str, ...]
    jaas: dict[str, JaasEntry]  # mechanism -> its listener's login module
    reauth_ms: int
    failed_auth_delay_ms: int

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def listener_security(config: BrokerConfig, listener: str) -> ListenerSecurity:
    mapping = security_protocol_map(config)
    protocol = mapping.get(listener.upper())
    if protocol is None:
        # Kafka refuses to start; tidelog has always served such listeners as PLAINTEXT and keeps doing so.
        log.warning("No security protocol defined for listener %s in listener.security.protocol.map: "
                    "serving it as PLAINTEXT", listener)
        protocol = "PLAINTEXT"
    mechanisms: tuple[str, ...] = ()
    jaas: dict[str, JaasEntry] = {}
    if protocol.startswith("SASL_"):
        # lazy for start-up time: only SASL listeners need it
        from tidelog.security.jaas import parse_jaas

        mechanisms = tuple(m.strip().upper() for m in listener_value(config, listener, "sasl.enabled.mechanisms")
                           if m.strip())
        overrides: dict[str, str] = getattr(config, "listener_overrides", {})
        for mechanism in mechanisms:
            text = overrides.get(f"{LISTENER_PREFIX}{listener.lower()}.{mechanism.lower()}.sasl.jaas.config")
            if text is not None:
                jaas[mechanism] = parse_jaas(text)
    return ListenerSecurity(listener.upper(), protocol, mechanisms, jaas,
                            int(listener_value(config, listener, "connections.max.reauth.ms") or 0),
                            int(config.get("connection.failed.authentication.delay.ms")))
