"""ApiVersions (key 18): the advertised ranges come from the static API table (KIP-35, KIP-511)."""

from __future__ import annotations

import re
from typing import Any

from tidelog.broker.apis import ApiEntry
from tidelog.broker.context import RequestContext
from tidelog.broker.features import FeatureControl
from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.metadata_codec import (
    ApiVersion,
    ApiVersionsResponseData,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = ApiKey.API_VERSIONS
NOTES = """a too-new version gets a v0 error body listing the ranges (UNSUPPORTED_VERSION); v3+ feature levels
(KIP-584): supported `metadata.version` 7–30, `kraft.version` 0–1 (v3 omits features with minimum 0,
KAFKA-17011), finalized 30 / 1 with their epoch"""

# Kafka's ApiVersionsRequest.isValid(): both software strings must match this (KIP-511).
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

def _entries(ranges: list[tuple[int, int, int]]) -> list[ApiVersion]:
    return [ApiVersion(k, lo, hi) for k, lo, hi in ranges]


def unsupported_version_response(entry: ApiEntry) -> ApiVersionsResponseData:
    """A too-new request: v0 body, UNSUPPORTED_VERSION and only our own key-18 range, so the client can
    retry with a version we serve (Kafka's ApiVersionsRequest.getErrorResponse)."""
    return ApiVersionsResponseData(0, ErrorCode.UNSUPPORTED_VERSION,
                                   _entries([(API_KEY, entry.min_version, entry.max_version)]))


def respond(v: int, request: Any, advertised: list[tuple[int, int, int]],
            features: FeatureControl | None = None) -> ApiVersionsResponseData:
    """The answer to ApiVersions v`v`, advertising `advertised` ((key, min, max) per API) and, from v3, the
    feature levels of `features` (KIP-584). Needs no other broker state: the connection answers it even while the
    broker is still loading. Hand-encoded (protocol/metadata_codec.py): it is on the start-up path."""
    error = ErrorCode.NONE
    if v >= 3:
        name = request.client_software_name
        version = request.client_software_version
        if not (name and version and _SOFTWARE_PATTERN.fullmatch(name) and _SOFTWARE_PATTERN.fullmatch(version)):
            error = ErrorCode.INVALID_REQUEST
    # Kafka's error response for INVALID_REQUEST carries no api keys (only UNSUPPORTED_VERSION lists key 18).
    response = ApiVersionsResponseData(v, error, _entries(advertised if error == ErrorCode.NONE else []))
    if v >= 3 and features is not None and error == ErrorCode.NONE:
        # Kafka's ApiVersionsResponse.createApiVersionsResponse: supported ranges, finalized levels and their epoch
        # (-1 and none when nothing is finalized, the defaults). An INVALID_REQUEST answer carries none of them.
        # KAFKA-17011: v3 clients cannot read a minimum of 0, so v3 leaves those features out.
        response.supported_features = [SupportedFeatureKey(n, lo, hi)
                                       for n, (lo, hi) in sorted(features.supported().items()) if v >= 4 or lo > 0]
        levels, response.finalized_features_epoch = features.finalized_levels()
        response.finalized_features = [FinalizedFeatureKey(n, level, level) for n, level in sorted(levels.items())]
    return response


async def handle(ctx: RequestContext, request: Any) -> Any:
    """Dispatched by the connection itself (see `respond`); kept for the registry's uniform interface."""
    return respond(ctx.api_version, request, ctx.broker.registry.advertised_ranges(), ctx.broker.features)
