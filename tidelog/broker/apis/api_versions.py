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
    API_VERSIONS_CLUSTER_CHECK_MIN_VERSION,
    ApiVersion,
    ApiVersionsResponseData,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = ApiKey.API_VERSIONS
NOTES = """a too-new version gets a v0 error body listing the ranges (UNSUPPORTED_VERSION); v3+ feature levels
(KIP-584): supported `metadata.version` 7–30, `kraft.version` 0–1 (v3 omits features with minimum 0,
KAFKA-17011), finalized 30 / 1 with their epoch; v5 (KIP-1242): a ClusterId/NodeId naming another cluster or node
gets REBOOTSTRAP_REQUIRED, one given without the other INVALID_REQUEST (both with no api keys)"""

# Kafka's ApiVersionsRequest.isValid(): both software strings must match this (KIP-511).
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

def _entries(ranges: list[tuple[int, int, int]]) -> list[ApiVersion]:
    return [ApiVersion(k, lo, hi) for k, lo, hi in ranges]


def unsupported_version_response(entry: ApiEntry) -> ApiVersionsResponseData:
    """A too-new request: v0 body, UNSUPPORTED_VERSION and only our own key-18 range, so the client can
    retry with a version we serve (Kafka's ApiVersionsRequest.getErrorResponse)."""
    return ApiVersionsResponseData(0, ErrorCode.UNSUPPORTED_VERSION,
                                   _entries([(API_KEY, entry.min_version, entry.max_version)]))


def names_a_node(v: int, request: Any) -> bool:
    """Whether this request asks to be checked against the cluster and node it reached (KIP-1242): ApiVersions
    v5+ with a ClusterId and a NodeId (Kafka's KafkaApis checks only with a ClusterId; one without the other is
    refused before any check)."""
    return v >= API_VERSIONS_CLUSTER_CHECK_MIN_VERSION and request.cluster_id is not None and request.node_id != -1


def _request_error(v: int, request: Any, this_node: tuple[str, int] | None) -> ErrorCode:
    """Kafka's KafkaApis.handleApiVersionsRequest checks, in its order: ApiVersionsRequest.isValid (the KIP-511
    software strings from v3; from v5 ClusterId and NodeId given together or not at all) -> INVALID_REQUEST; then
    a ClusterId that is not this cluster's or a NodeId that is not this node's -> REBOOTSTRAP_REQUIRED
    (KafkaApis.clusterIdOrNodeIdIsInvalid, KIP-1242)."""
    if v >= 3:
        name = request.client_software_name
        version = request.client_software_version
        if not (name and version and _SOFTWARE_PATTERN.fullmatch(name) and _SOFTWARE_PATTERN.fullmatch(version)):
            return ErrorCode.INVALID_REQUEST
    if v >= API_VERSIONS_CLUSTER_CHECK_MIN_VERSION:
        if (request.cluster_id is None) != (request.node_id == -1):
            return ErrorCode.INVALID_REQUEST  # a node named without its cluster, or a cluster without the node
        if request.cluster_id is not None:
            if this_node is None:
                raise ValueError("a ClusterId/NodeId check needs this broker's cluster id and node id")
            if (request.cluster_id, request.node_id) != this_node:
                return ErrorCode.REBOOTSTRAP_REQUIRED
    return ErrorCode.NONE


def respond(v: int, request: Any, advertised: list[tuple[int, int, int]],
            features: FeatureControl | None = None,
            this_node: tuple[str, int] | None = None) -> ApiVersionsResponseData:
    """The answer to ApiVersions v`v`, advertising `advertised` ((key, min, max) per API) and, from v3, the
    feature levels of `features` (KIP-584). Needs no other broker state, so the connection answers it even while
    the broker is still loading, except a v5 request that names a cluster and node (`names_a_node`): that one is
    checked against `this_node` (cluster id, node id), known once the logs are loaded. Hand-encoded
    (protocol/metadata_codec.py): it is on the start-up path."""
    error = _request_error(v, request, this_node)
    # Kafka's error response (ApiVersionsRequest.getErrorResponse) for INVALID_REQUEST or REBOOTSTRAP_REQUIRED
    # carries no api keys (only UNSUPPORTED_VERSION lists key 18).
    response = ApiVersionsResponseData(v, error, _entries(advertised if error == ErrorCode.NONE else []))
    if v >= 3 and features is not None and error == ErrorCode.NONE:
        # Kafka's ApiVersionsResponse.createApiVersionsResponse: supported ranges, finalized levels and their epoch
        # (-1 and none when nothing is finalized, the defaults). An error answer carries none of them.
        # KAFKA-17011: v3 clients cannot read a minimum of 0, so v3 leaves those features out.
        response.supported_features = [SupportedFeatureKey(n, lo, hi)
                                       for n, (lo, hi) in sorted(features.supported().items()) if v >= 4 or lo > 0]
        levels, response.finalized_features_epoch = features.finalized_levels()
        response.finalized_features = [FinalizedFeatureKey(n, level, level) for n, level in sorted(levels.items())]
    return response


async def handle(ctx: RequestContext, request: Any) -> Any:
    """Dispatched by the connection itself (see `respond`); kept for the registry's uniform interface."""
    broker = ctx.broker
    return respond(ctx.api_version, request, broker.registry.advertised_ranges(), broker.features,
                   (broker.cluster_id, broker.node_id))
