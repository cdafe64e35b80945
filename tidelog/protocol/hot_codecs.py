"""The hand-written request decoders the connection uses instead of kafka-python's schema classes (the hot
path: their generic codec copies record bytes). Every other API is decoded by kafka-python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidelog.protocol.api_keys import ApiKey
from tidelog.protocol.produce_codec import FLEXIBLE_MIN_VERSION as PRODUCE_FLEXIBLE_MIN_VERSION
from tidelog.protocol.produce_codec import decode_produce_request

# api key -> (decode(frame, body offset after the header's tagged fields, version) -> request,
#             first flexible version: request header v2, whose tagged fields precede the body)
HAND_DECODERS: dict[int, tuple[Callable[[memoryview, int, int], Any], int]] = {
    ApiKey.PRODUCE: (decode_produce_request, PRODUCE_FLEXIBLE_MIN_VERSION),
}
