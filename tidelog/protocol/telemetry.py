"""KIP-714 client telemetry codecs kafka-python 3.0.12 does not have: GetTelemetrySubscriptions (71),
PushTelemetry (72), and ListConfigResources (74, v0 was ListClientMetricsResources; v1 added resource types,
KIP-1142). Schemas in `tidelog/protocol/schemas/` follow Kafka's message JSON; kafka-python's schema-driven
ApiMessage builds the codec from them (as `tidelog.protocol.kip848` does)."""

from __future__ import annotations

from tidelog.protocol.messages import quiet_schema_loader

quiet_schema_loader()  # also installs the lazy `kafka` package

from kafka.protocol.api_message import ApiMessage  # noqa: E402

_SCHEMAS = "tidelog.protocol.schemas"


class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class PushTelemetryRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class PushTelemetryResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ListConfigResourcesRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass


class ListConfigResourcesResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg,misc]
    pass
