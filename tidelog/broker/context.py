"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.protocol.errors import CloseConnection

if TYPE_CHECKING:
    from tidelog.broker.state import BrokerState
    from tidelog.security.authorizer import StandardAuthorizer
    from tidelog.security.principal import KafkaPrincipal

__all__ = ["CloseConnection", "RequestContext"]  # CloseConnection lives in protocol/errors (security raises it)


@dataclass(slots=True)
class RequestContext:
    """What a handler knows of its request besides the body: the broker, the header, the client and listener."""

    broker: BrokerState
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    listener: str = "PLAINTEXT"
    session: Any = None  # tidelog.security.authenticator.Session on TLS/SASL listeners (principal), else None
    client_port: int | None = None
    # What the client said of itself in ApiVersions v3+ (KIP-511), "" before: Kafka's ClientInformation.
    client_software_name: str = ""
    client_software_version: str = ""
    mutation_quota: Any = None  # the ControllerMutationQuota a topic mutation spent (broker/mutation_quota.py)

    # What security sees of the request (security/authorizer.AuthorizableRequestContext, Kafka's interface of
    # that name): the principal, the client's host and the authorizer, not the broker state.
    @property
    def principal(self) -> KafkaPrincipal | None:
        """The session's principal on TLS/SASL listeners; None on PLAINTEXT (ANONYMOUS)."""
        return None if self.session is None else self.session.principal

    @property
    def authorizer(self) -> StandardAuthorizer | None:
        return self.broker.security.authorizer
