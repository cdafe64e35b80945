"""BrokerSecurity: the broker's security settings and stores, reachable as `BrokerState.security`.

Built when the broker state is (TLS contexts and JAAS configs are checked then, so a bad setting stops the
start-up with a message naming the config); the SCRAM and ACL stores are built on first use, or at once when
their file exists, so that a damaged file stops start-up (StateFileError) rather than a later request."""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tidelog.clock import Clock
from tidelog.config.broker_config import parse_listeners
from tidelog.config.definitions import ConfigError
from tidelog.metadata import files as metadata_files
from tidelog.security.listener_config import (
    SUPPORTED_MECHANISMS,
    ListenerSecurity,
    listener_security,
    listener_value,
)

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.security.acl_store import AclStore
    from tidelog.security.authenticator import Session
    from tidelog.security.authorizer import StandardAuthorizer
    from tidelog.security.principal import SslPrincipalMapper
    from tidelog.security.scram_store import ScramCredentialStore

log = logging.getLogger(__name__)

SCRAM_FILE = metadata_files.SCRAM_CREDENTIALS.name  # start-up looks for them without importing the stores
ACL_FILE = metadata_files.ACLS.name


class BrokerSecurity:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or Clock()
        self.log_dir = config.log_dirs[0]
        self.listeners: dict[str, ListenerSecurity] = {}
        self._ssl: dict[str, ssl.SSLContext] = {}
        self._mappers: dict[str, SslPrincipalMapper] = {}
        for name, _host, _port in parse_listeners(config.listeners):
            sec = listener_security(config, name)
            self.listeners[name] = sec
            unsupported = [m for m in sec.mechanisms if m not in SUPPORTED_MECHANISMS]
            if unsupported:
                raise ConfigError(f"sasl.enabled.mechanisms of listener {name} names unsupported mechanisms "
                                  f"{unsupported} (supported: {', '.join(SUPPORTED_MECHANISMS)})")
            if sec.uses_sasl and not sec.mechanisms:
                raise ConfigError(f"Listener {name} uses {sec.protocol} but sasl.enabled.mechanisms is empty")
            if "PLAIN" in sec.mechanisms and "PLAIN" not in sec.jaas:
                raise ConfigError(f"SASL/PLAIN on listener {name} needs listener.name.{name.lower()}.plain."
                                  "sasl.jaas.config (PlainLoginModule required user_<name>=\"<password>\";)")
            if sec.uses_tls:
                from tidelog.security.principal import SslPrincipalMapper
                from tidelog.security.ssl_context import create_server_context

                self._ssl[name] = create_server_context(config, name)
                try:
                    self._mappers[name] = SslPrincipalMapper.from_rules(
                        listener_value(config, name, "ssl.principal.mapping.rules"))
                except ValueError as exc:
                    raise ConfigError(f"ssl.principal.mapping.rules: {exc}") from exc
        if metadata_files.SCRAM_CREDENTIALS.exists(self.log_dir):
            self.scram_store  # noqa: B018 - read now: a damaged file stops start-up
        if metadata_files.ACLS.exists(self.log_dir):
            self.acl_store  # noqa: B018
        self.authorizer: StandardAuthorizer | None = None
        if config.get("authorizer.class.name"):
            from tidelog.security.authorizer import StandardAuthorizer

            self.authorizer = StandardAuthorizer.from_config(config, self.acl_store)

    @cached_property
    def scram_store(self) -> ScramCredentialStore:
        from tidelog.security.scram_store import ScramCredentialStore

        return ScramCredentialStore(self.log_dir)

    @cached_property
    def acl_store(self) -> AclStore:
        from tidelog.security.acl_store import AclStore

        return AclStore(self.log_dir)

    def uses_tls(self, listener: str) -> bool:
        return listener in self._ssl

    def ssl_context(self, listener: str) -> ssl.SSLContext:
        return self._ssl[listener]

    def server_starter(self, listener: str) -> Any:
        """`asyncio.start_server`, or for a TLS listener the same with its SSLContext (tidelog.security.tls)."""
        if listener not in self._ssl:
            return asyncio.start_server
        from tidelog.security.tls import start_tls_server

        return functools.partial(start_tls_server, self._ssl[listener], listener)

    def protocol_server_starter(self, listener: str) -> Any:
        """`loop.create_server(protocol_factory, ...)`, or for a TLS listener the same with each connection's
        protocol behind the loop's SSLProtocol (tidelog.security.tls); the broker's connections are
        BufferedProtocols (tidelog.broker.frame_stream)."""
        if listener not in self._ssl:
            return asyncio.get_running_loop().create_server
        from tidelog.security.tls import create_tls_server

        return functools.partial(create_tls_server, self._ssl[listener], listener)

    def principal_mapper(self, listener: str) -> SslPrincipalMapper:
        return self._mappers[listener]

    def new_session(self, listener: str) -> Session | None:
        """The authentication state of a new connection; None on PLAINTEXT listeners (principal ANONYMOUS,
        nothing on the hot path)."""
        sec = self.listeners.get(listener)
        if sec is None or sec.protocol == "PLAINTEXT":
            return None
        from tidelog.security.authenticator import Session  # lazy for start-up time: PLAINTEXT never needs it

        return Session(self, sec)
