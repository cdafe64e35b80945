"""The hand-written request decoders the connection uses instead of kafka-python's schema classes: Produce (the
hot path: their generic codec copies record bytes), ApiVersions and Metadata (the start-up path: building their
schema classes costs more than answering). Every other API is decoded by kafka-python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.metadata_codec import (
    API_VERSIONS_FLEXIBLE_MIN_VERSION,
    METADATA_FLEXIBLE_MIN_VERSION,
    decode_api_versions_request,
    decode_metadata_request,
)
from tidelog.protocol.produce_codec import FLEXIBLE_MIN_VERSION as PRODUCE_FLEXIBLE_MIN_VERSION
from tidelog.protocol.produce_codec import decode_produce_request

# api key -> (decode(frame, body offset after the header's tagged fields, version) -> request,
#             first flexible version: request header v2, whose tagged fields precede the body)
HAND_DECODERS: dict[int, tuple[Callable[[memoryview, int, int], Any], int]] = {
    ApiKey.PRODUCE: (decode_produce_request, PRODUCE_FLEXIBLE_MIN_VERSION),
    ApiKey.METADATA: (decode_metadata_request, METADATA_FLEXIBLE_MIN_VERSION),
    # request header v2 from v3 (only ApiVersions' response header stays v0, KIP-511)
    ApiKey.API_VERSIONS: (decode_api_versions_request, API_VERSIONS_FLEXIBLE_MIN_VERSION),
}
