"""ApiVersions (key 18): the advertised ranges come from the registered handler modules (KIP-35, KIP-511)."""

from __future__ import annotations

import re
from typing import Any

from tidelog.broker.context import RequestContext
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.messages import response_class

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

# Kafka's ApiVersionsRequest.isValid(): both software strings must match this (KIP-511).
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

def advertised_ranges(ctx: RequestContext) -> list[tuple[int, int, int]]:
    """What the server answering `ctx` dispatches to (broker.server.ApiRegistry.advertised_ranges)."""
    registry = ctx.broker.api_registry
    if registry is None:
        from tidelog.broker.server import default_registry

        registry = default_registry()
    return list(registry.advertised_ranges())


def _entries(cls: Any, ranges: list[tuple[int, int, int]]) -> list[Any]:
    return [cls.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in ranges]


def unsupported_version_response(ctx: RequestContext) -> Any:
    """A too-new request: v0 body, UNSUPPORTED_VERSION and only our own key-18 range, so the client can
    retry with a version we serve (Kafka's ApiVersionsRequest.getErrorResponse)."""
    cls = response_class(API_KEY)
    return cls[0](error_code=ErrorCode.UNSUPPORTED_VERSION,
                  api_keys=_entries(cls, [(API_KEY, MIN_VERSION, MAX_VERSION)]))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY)
    v = ctx.api_version
    error = ErrorCode.NONE
    if v >= 3:
        name = request.client_software_name
        version = request.client_software_version
        if not (name and version and _SOFTWARE_PATTERN.fullmatch(name) and _SOFTWARE_PATTERN.fullmatch(version)):
            error = ErrorCode.INVALID_REQUEST
    # Kafka's error response for INVALID_REQUEST carries no api keys (only UNSUPPORTED_VERSION lists key 18).
    ranges = advertised_ranges(ctx) if error == ErrorCode.NONE else []
    fields: dict[str, Any] = {"error_code": error, "api_keys": _entries(cls, ranges)}
    if v >= 1:
        fields["throttle_time_ms"] = 0
    if v >= 3:
        # No features finalized: no KIP-890 transaction.version / KIP-848 group.version (spec §1.5).
        fields.update(supported_features=[], finalized_features_epoch=-1, finalized_features=[],
                      zk_migration_ready=False)
    return cls[v](**fields)
