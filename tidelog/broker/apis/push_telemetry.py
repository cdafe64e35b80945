"""PushTelemetry (key 72), v0 (KIP-714): a client's OTLP metrics for its subscription, checked as Kafka's
ClientMetricsManager does (stale subscription id, too early, codec, size, push after `terminating`)."""

from __future__ import annotations

from typing import Any

from tidelog.broker.apis._shared import response_cls
from tidelog.broker.client_metrics import ClientInfo
from tidelog.broker.context import RequestContext

API_KEY = 72
NOTES = """zero instance id or a push after `terminating` INVALID_REQUEST, stale subscription id
UNKNOWN_SUBSCRIPTION_ID, too early THROTTLING_QUOTA_EXCEEDED (a terminating push is never too early), unknown
codec UNSUPPORTED_COMPRESSION_TYPE, over 1 MiB TELEMETRY_TOO_LARGE, undecodable payload INVALID_RECORD. OTLP
MetricsData gauges and sums (`protocol/otlp.py`, a small protobuf reader) exposed on Prometheus as
`tidelog_client_<name, dots as _>{client_instance_id, client_id, <point attributes>}`; delta sums accumulated,
monotonic sums as counters; histograms/summaries skipped; an instance idle 3 push intervals (≥ 60 s) is
dropped with its series"""


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = ctx.broker.client_metrics.push(
        request.client_instance_id, request.subscription_id, bool(request.terminating), request.compression_type,
        bytes(request.metrics or b""), ClientInfo.of(ctx),
    )
    return response_cls(ctx)(throttle_time_ms=0, error_code=int(error))
