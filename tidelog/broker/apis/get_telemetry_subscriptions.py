"""GetTelemetrySubscriptions (key 71), v0 (KIP-714): the client's instance id (a new one for the zero uuid)
and what its matching CLIENT_METRICS subscriptions ask it to push (Kafka's ClientMetricsManager)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.client_metrics import ACCEPTED_COMPRESSION_TYPES, ClientInfo
from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode

API_KEY = 71
NOTES = """KIP-714 (`broker/client_metrics.py`, Kafka's ClientMetricsManager): a new client instance id for
the zero uuid; the matching CLIENT_METRICS subscriptions' metric prefixes (`*` sent as the empty prefix =
all), smallest `interval.ms` (default 300000), subscription id = CRC32C of metrics+interval plus the instance
id's hash (changes when the subscriptions change); accepted codecs gzip/snappy/lz4/zstd, `telemetry.max.bytes`
1 MiB, delta temporality; too early (within the push interval) THROTTLING_QUOTA_EXCEEDED. No subscription: an
empty one, and clients do not push. Kafka (4.3, 4.4) advertises 71/72 only with a metrics-reporter plugin; tidelog is
its own reporter. Own codec (`protocol/schemas/`)"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    # KafkaApis handles it without an ACL check: every client may ask for its subscription
    manager = ctx.broker.client_metrics
    error, instance = manager.get_subscriptions(request.client_instance_id, ClientInfo.of(ctx))
    cls = response_cls(ctx)
    if error is not ErrorCode.NONE:  # KafkaApis answers an error with the response's defaults
        return cls(throttle_time_ms=0, error_code=int(error), client_instance_id=None, subscription_id=0,
                            accepted_compression_types=[], push_interval_ms=0, telemetry_max_bytes=0,
                            delta_temporality=False, requested_metrics=[])
    return cls(
        throttle_time_ms=0,
        error_code=0,
        client_instance_id=instance.instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
        push_interval_ms=instance.push_interval_ms,
        telemetry_max_bytes=manager.telemetry_max_bytes,
        delta_temporality=True,  # ClientMetricsManager always asks for delta temporality
        requested_metrics=list(instance.metrics),
    )
