"""What a handler knows about the request it is answering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidelog.broker.state import BrokerState
    from tidelog.protocol.wire import Piece


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


class CloseConnection(Exception):
    """Raised by a handler to close its client's connection without a response; the connection logs
    `reason` as one line (no traceback). Kafka's RequestChannel.closeConnection, e.g. for a failed acks=0
    Produce, whose client gets no response and notices the error only by the closed connection."""

    def __init__(self, reason: str, answer: list[Piece] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.answer = answer  # written before the connection closes (a failed SASL authentication's answer)
